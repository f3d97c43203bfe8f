"""The reward service (``aka serve``): evaluations requested over HTTP, queued durably, run in
fresh processes on GPU slots; its clients. See docs/service.md."""
