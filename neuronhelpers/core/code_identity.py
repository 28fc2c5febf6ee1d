"""What a piece of Python executes, apart from how it is written down: its syntax tree without comments and
docstrings. A row's run.py is today's recipe when the two execute the same (store/publish.py ``check_run_py``), the CPU
reference cache and the twins' builder digest key on it, so a comment or docstring edit stales nothing and a code edit
stales what it touches (docs/design.md section 3). A leaf: the standard library only.
"""

from __future__ import annotations

import ast
import hashlib

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _without_docstrings(source: str) -> ast.Module:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and node.body and isinstance(node.body[0], ast.Expr) and isinstance(
                node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def executable_text(source: str) -> str:
    """The source as Python writes it back without comments and docstrings (one statement per line, its own layout
    gone): what two versions of a file are compared on, line by line, to say where they differ."""
    return ast.unparse(_without_docstrings(source))


def code_digest(source: str) -> str:
    """sha256 of what the source executes (its syntax tree without comments and docstrings); SyntaxError where it is
    not Python."""
    tree = _without_docstrings(source)
    return hashlib.sha256(ast.dump(tree, annotate_fields=False, include_attributes=False).encode()).hexdigest()
