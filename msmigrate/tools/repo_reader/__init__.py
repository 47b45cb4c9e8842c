"""repo_reader: read-only, bounded views of the source model and the target checkout (DESIGN: tools/repo_reader).

Cores (pure, return ``ToolResult``): ``tree``, ``read_lines``, ``grep``, ``outline``, ``hf_summary``,
``target_inventory``. ``repo_reader_tools(ctx)`` wraps them as LangChain tools bound to a run.
"""

from msmigrate.tools.repo_reader.files import grep, list_files, read_lines, resolve_inside, tree
from msmigrate.tools.repo_reader.hf_summary import hf_summary
from msmigrate.tools.repo_reader.outline import outline, outline_source
from msmigrate.tools.repo_reader.target_inventory import target_inventory
from msmigrate.tools.repo_reader.tools import repo_reader_tools

__all__ = ["grep", "hf_summary", "list_files", "outline", "outline_source", "read_lines", "repo_reader_tools",
           "resolve_inside", "target_inventory", "tree"]
