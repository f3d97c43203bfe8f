"""Keeps the template's own tests out of the repository's test run (its names are placeholders).

Once the folder is copied to plugins/aka-<kind>-<name>/ this file does nothing; delete it.
"""

from pathlib import Path

collect_ignore = ["tests"] if Path(__file__).parent.name == "_template" else []
