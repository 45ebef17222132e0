"""Each command's parser, light to import (harness/commands/__init__.py)."""
