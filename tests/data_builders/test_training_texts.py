"""The real-text readers: headings, prose paragraphs, and nothing of the code or markup around them."""

from __future__ import annotations

import gzip

from training_texts import debian_faq_texts, pod_text, roff_text, sotu_texts

POD = """=head1 NAME

perlthing - how things work

=head1 DESCRIPTION

The C<thing> function returns a list.
It never dies.

    my @x = thing();   # verbatim code is skipped

=head2 Options

=over 4

=item B<--fast>

Runs faster, see L<perlrun|perlrun/Options>.

=back
"""

ROFF = r""".\" a comment
.TH demo 5 2022-10-30 "Linux man-pages 6.03"
.SH NAME
demo \- a demonstration file
.SH DESCRIPTION
The file
.I /etc/demo
holds one \fBentry\fP per line \- nothing else.
.PP
Blank lines are ignored by the reader.
.nf
code line that must not appear
.fi
.SS Fields
Each entry has three fields separated by colons.
"""

FAQ = """
                      The Debian GNU/Linux FAQ

Chapter\xa01.\xa0Definitions and overview

1.1.\xa0What is this FAQ?

    This document gives frequently asked questions about the
    Debian distribution.

      * a bullet point that is kept as its own paragraph

1.2.\xa0What is Debian?

    Debian is a distribution.

Chapter\xa02.\xa0Getting Debian

2.1.\xa0Where do I get it?

    From a mirror.
"""


def test_pod_headings_and_prose_without_code(tmp_path):
    path = tmp_path / "perlthing.pod"
    path.write_text(POD)
    text = pod_text(path)
    headings = [h for h, _ in text.sections]
    assert headings == ["NAME", "DESCRIPTION", "Options"]
    body = " ".join(text.paragraphs())
    assert "The thing function returns a list. It never dies." in body
    assert "--fast" in body and "Runs faster, see perlrun." in body
    assert "my @x" not in body and "C<" not in body


def test_roff_text_without_requests_fonts_or_literal_blocks(tmp_path):
    path = tmp_path / "demo.5.gz"
    with gzip.open(path, "wt") as f:
        f.write(ROFF)
    text = roff_text(path)
    assert text.id == "manpages/demo.5" and text.title == "demo"
    assert [h for h, _ in text.sections] == ["Description", "Fields"]  # NAME is left out
    assert text.sections[0][1] == ["The file /etc/demo holds one entry per line - nothing else.",
                                   "Blank lines are ignored by the reader."]
    assert "code line" not in " ".join(text.paragraphs()) and "\\f" not in " ".join(text.paragraphs())


def test_debian_faq_chapters_and_questions(tmp_path):
    path = tmp_path / "faq.txt"
    path.write_text(FAQ)
    texts = debian_faq_texts(path)
    assert [t.title for t in texts] == ["Definitions and overview", "Getting Debian"]
    assert [h for h, _ in texts[0].sections] == ["What is this FAQ?", "What is Debian?"]
    assert texts[0].sections[0][1] == [
        "This document gives frequently asked questions about the Debian distribution.",
        "a bullet point that is kept as its own paragraph"]


def test_sotu_speeches_lose_their_salutation(tmp_path):
    (tmp_path / "1790-Washington-1.txt").write_text("Fellow-Citizens:\n\nI embrace the opportunity.\n\nWe thrive.\n")
    (text,) = sotu_texts(tmp_path)
    assert text.id == "sotu/1790-Washington-1" and text.title == "Washington, 1790"
    assert text.paragraphs() == ["I embrace the opportunity.", "We thrive."]
