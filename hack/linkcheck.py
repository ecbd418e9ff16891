#!/usr/bin/env python3
"""Checks the internal links of the built book and of README.md, without the network.

    python3 hack/linkcheck.py [BOOK_DIR]     (default docs/book, as `mdbook build docs` writes it)

Book: every page's `href` and `src` that is not another site's (no scheme, not `//host`) must lead to a
file of the built book, and its `#fragment` to an `id` (or `name`) on that page. README.md: every
relative link must lead to a file of the repository; a fragment into a chapter (`docs/src/X.md#a`) must
be an id of the built `X.html`, and any other fragment a heading of the Markdown file it names, as
GitHub makes its anchors. Links to other sites are not followed. Prints every dead link and exits 1
when there is one. Standard library only.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "docs/src"


class Page(HTMLParser):
    """The ids, the `<base href>` and the links of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []
        self.base = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "base" and attrs.get("href"):
            self.base = attrs["href"]
        for key in ("href", "src"):
            if attrs.get(key) is not None and tag != "base":
                self.links.append((tag, attrs[key], self.getpos()[0]))


def is_external(url):
    parts = urlsplit(url)
    return bool(parts.scheme) or url.startswith("//")


def parse(path):
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def check_book(book):
    """The number of pages of the built book (an absolute path), and its dead links."""
    pages = {p.resolve(): parse(p) for p in sorted(book.rglob("*.html"))}
    dead = []
    for path, page in pages.items():
        for tag, url, line in page.links:
            if is_external(url) or url == "":
                continue
            parts = urlsplit(url)
            if page.base is not None and not parts.path.startswith("/"):
                base_dir = book if page.base.startswith("/") else path.parent / page.base
            else:
                base_dir = path.parent
            if parts.path.startswith("/"):
                target = book / unquote(parts.path).lstrip("/")
            elif parts.path:
                target = base_dir / unquote(parts.path)
            else:
                target = path
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(book)}:{line}: <{tag}> {url}"
            if book not in target.parents:
                dead.append(f"{where}: leads out of the book")
                continue
            if not target.is_file():
                dead.append(f"{where}: no file {target.relative_to(book)}")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in pages[target].ids:
                dead.append(f"{where}: no anchor #{fragment} in {target.relative_to(book)}")
    return len(pages), dead


def github_anchors(markdown):
    """The anchors GitHub gives the headings of a Markdown text (outside code fences)."""
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not match:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match.group(1)).lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def markdown_links(markdown):
    """(line number, target) of the inline links and images of a Markdown text, code left out."""
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for match in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            yield number, match.group(1)


def check_readme(book):
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    dead = []
    for line, url in markdown_links(text):
        if is_external(url):
            continue
        parts = urlsplit(url)
        target = (ROOT / unquote(parts.path)).resolve() if parts.path else readme
        where = f"README.md:{line}: {url}"
        if not target.exists():
            dead.append(f"{where}: no file {unquote(parts.path)}")
            continue
        fragment = unquote(parts.fragment)
        if not fragment:
            continue
        if target.parent == SRC.resolve() and target.suffix == ".md":
            built = book / target.with_suffix(".html").name
            ids = parse(built).ids if built.is_file() else set()
            if not built.is_file():
                dead.append(f"{where}: {target.name} is not a chapter of the book")
            elif fragment not in ids:
                dead.append(f"{where}: no anchor #{fragment} in the built {built.name}")
        elif target.suffix == ".md":
            if fragment not in github_anchors(target.read_text(encoding="utf-8")):
                dead.append(f"{where}: no heading for #{fragment} in {target.relative_to(ROOT)}")
    return dead


def main():
    book = (Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs/book").resolve()
    if not (book / "index.html").is_file():
        sys.exit(f"linkcheck: no built book at {book} (run mdbook build docs first)")
    pages, dead = check_book(book)
    dead += check_readme(book)
    for problem in dead:
        print(problem, file=sys.stderr)
    if dead:
        sys.exit(f"linkcheck: {len(dead)} dead internal links")
    print(f"linkcheck: {pages} pages and README.md, no dead internal link")


if __name__ == "__main__":
    main()
