"""Screenshots for the README, made with headless chromium (Debian's ``chromium`` package).

    python scripts/screenshot.py text OUT.png < table.txt   # terminal text, e.g. a plan's table
    python scripts/screenshot.py html REPORT.html OUT.png   # a page, e.g. plan -o html

``text`` draws its standard input (first --lines lines) as a terminal would, light on dark, in
a window --cols characters wide.
"""

from __future__ import annotations

import argparse
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHAR_WIDTH = 8.4  # px per character of the 14px monospace font below
LINE_HEIGHT = 18


def _chromium(page: Path, out: Path, width: int, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={out.resolve()}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
        )


def text_page(text: str, lines: int, cols: int) -> str:
    shown = "\n".join(line.rstrip("\r")[:cols] for line in text.splitlines()[:lines])
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>'
        "body{margin:0;background:#0d1117}"
        "pre{margin:0;padding:14px 16px;color:#e6edf3;"
        "font:14px/18px 'DejaVu Sans Mono',monospace;white-space:pre}"
        f"</style></head><body><pre>{html.escape(shown)}</pre></body></html>"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    text = sub.add_parser("text", help="terminal text from stdin to a PNG")
    text.add_argument("out", type=Path)
    text.add_argument("--lines", type=int, default=30)
    text.add_argument("--cols", type=int, default=120)
    page = sub.add_parser("html", help="an HTML file to a PNG")
    page.add_argument("page", type=Path)
    page.add_argument("out", type=Path)
    page.add_argument("--width", type=int, default=1200)
    page.add_argument("--height", type=int, default=1600)
    args = parser.parse_args()
    if args.kind == "text":
        content = sys.stdin.read()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "text.html"
            path.write_text(text_page(content, args.lines, args.cols), encoding="utf-8")
            width = int(args.cols * CHAR_WIDTH) + 40
            height = min(args.lines, len(content.splitlines())) * LINE_HEIGHT + 30
            _chromium(path, args.out, width, height)
    else:
        _chromium(args.page, args.out, args.width, args.height)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
