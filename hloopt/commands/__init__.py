"""Click commands that live outside ``hloopt.cli`` (registered there with ``main.add_command``)."""
from hloopt.commands.execution import compare_command, exec_command

__all__ = ["compare_command", "exec_command"]
