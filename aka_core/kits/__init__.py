"""The machinery a kind of plugin is built on, exported to plugins through ``aka_core.plugin``:
``native`` (compiled backends), ``python_backend`` (backends whose candidates are Python),
``agent_runtime`` and ``agent_sandbox`` (agents that drive a CLI), ``scoring`` (scorer gates), and
``policy_agents`` (a Python callable as an agent, for RL trainers).
"""
