"""Count `Any` in the function signatures of the broker's rooms (gateway/, protocol/, broker/, engine/).

For each folder it prints how many annotated parameters and returns there are, how many are
annotated `Any` itself (`x: Any`, `-> Any | None`), and how many mention `Any` anywhere
(`dict[str, Any]` too). Unannotated parameters (`self`) are not counted.

`--max FOLDER=N` fails (exit 1) when the parameters and returns of FOLDER that mention `Any`
number more than N: `make check` passes today's counts so that no new `Any` appears, and they
are lowered as the boundary gets its types (issue 10).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("gateway", "protocol", "broker", "engine")


@dataclass
class Tally:
    typed: int = 0
    bare: int = 0  # annotated `Any`, alone or in a union
    mentions: int = 0  # `Any` anywhere in the annotation

    def add(self, annotation: ast.expr | None) -> None:
        if annotation is None:
            return
        self.typed += 1
        self.bare += "Any" in ast.unparse(annotation).replace(" ", "").split("|")
        self.mentions += any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(annotation))

    def line(self, what: str) -> str:
        share = self.bare / self.typed if self.typed else 0.0
        return f"  {what:<11}{self.typed:>6} typed {self.bare:>5} Any ({share:.0%}) {self.mentions:>5} mention Any"


def tally(folder: Path) -> tuple[Tally, Tally]:
    """(parameters, returns) over every function and method in the folder's modules."""
    params, returns = Tally(), Tally()
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    params.add(arg.annotation if arg is not None else None)
                returns.add(node.returns)
    return params, returns


def parse_ceiling(text: str) -> tuple[str, int]:
    folder, _, number = text.partition("=")
    if folder not in FOLDERS or not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected FOLDER=N with FOLDER in {FOLDERS}, got {text!r}")
    return folder, int(number)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=parse_ceiling, action="append", default=[], metavar="FOLDER=N",
                        help="fail when FOLDER's parameters and returns mentioning Any exceed N")
    ceilings = dict(parser.parse_args(argv).max)
    failed = False
    for folder in FOLDERS:
        params, returns = tally(ROOT / folder)
        mentions = params.mentions + returns.mentions
        print(f"{folder}/: {mentions} parameters and returns mention Any")
        print(params.line("parameters"))
        print(returns.line("returns"))
        if folder in ceilings and mentions > ceilings[folder]:
            print(f"{folder}/: {mentions} mention Any, more than the {ceilings[folder]} allowed: "
                  "type the new signatures instead", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
