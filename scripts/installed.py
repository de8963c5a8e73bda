"""Run mypy or lint-imports on the installed `martlet` package, configured by pyproject.toml.

    python scripts/installed.py mypy [MYPY ARGS]
    python scripts/installed.py lint-imports

The source folders (gateway/, engine/, ...) only become `martlet.gateway`, `martlet.engine`, ...
when installed (setup.py maps them), and an editable install reaches them through an import
hook that neither mypy nor import-linter can follow. So this script asks the installed package
where each subpackage lives, links them under .cache/installed/martlet/, and runs the tool in
.cache/installed/ on `martlet`. mypy's reported paths are mapped back to the source folders.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
TREE = ROOT / ".cache" / "installed"
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
COMMANDS = {
    "mypy": ["-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(TREE / "mypy-cache"), "-p", "martlet"],
    # lint-imports finds `martlet` because the folder it runs in is on its import path
    "lint-imports": ["-c", LINT_IMPORTS, "--no-logo", "--cache-dir", str(TREE / "import-linter-cache"), str(CONFIG)],
}


def folder_names() -> list[str]:
    """setup.py's FOLDERS: the top-level folders installed as martlet.<folder>."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FOLDERS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no FOLDERS")


def subpackages() -> dict[str, Path]:
    """Each installed martlet.<name> and the folder it is loaded from."""
    folders = {}
    for name in folder_names():
        spec = importlib.util.find_spec(f"martlet.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit(f"martlet.{name} is not installed for {sys.executable}: run `make install-lint`")
        folders[name] = Path(list(spec.submodule_search_locations)[0])
    return folders


def link_tree(folders: dict[str, Path]) -> None:
    """A martlet/ folder whose entries link to the installed subpackages (rebuilt every run)."""
    package = TREE / "martlet"
    package.mkdir(parents=True, exist_ok=True)
    for entry in package.iterdir():
        entry.unlink()
    for name, folder in folders.items():
        (package / name).symlink_to(folder, target_is_directory=True)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        raise SystemExit(f"usage: {Path(__file__).name} {{{'|'.join(COMMANDS)}}} [ARGS]")
    folders = subpackages()
    link_tree(folders)
    command = [sys.executable, *COMMANDS[argv[0]], *argv[1:]]
    result = subprocess.run(command, cwd=TREE, env=os.environ | {"MYPYPATH": str(TREE)},
                            capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    for name, folder in folders.items():
        output = output.replace(f"martlet/{name}/", f"{os.path.relpath(folder)}/")
    print(output, end="")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
