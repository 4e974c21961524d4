"""`python -m ssog_lab book`: the folder it refuses, and the site it publishes from executed notebooks (no
browser here: tests/test_browser.py opens the published course offline)."""

from __future__ import annotations

import nbformat
import pytest

from ssog_lab import book


def test_build_refuses_a_folder_it_did_not_make(tmp_path):
    (tmp_path / "notes.txt").write_text("a reader's file")
    with pytest.raises(FileExistsError, match="--out"):
        book.build(tmp_path, fast=True)
    assert (tmp_path / "notes.txt").read_text() == "a reader's file"


def test_publish_writes_one_page_per_notebook_one_plotlyjs_and_the_index(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for name, link in (("00_first", "01_second.ipynb"), ("01_second", "00_first.ipynb")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
            f"# {name}: a title\n\nFirst paragraph with $x^2$ and `code`; next: [the other]({link}).")])
        nbformat.write(nb, tmp_path / "notebooks" / f"{name}.ipynb")
    rows = book.publish(tmp_path, {"00_first": 3.2, "01_second": None}, fast=True)
    assert [row["title"] for row in rows] == ["00_first: a title", "01_second: a title"]
    assert rows[0]["summary"].startswith("First paragraph with x^2 and code")
    index = (tmp_path / "index.html").read_text()
    assert 'href="00_first.html"' in index and "(3 s)" in index and 'href="01_second.html"' in index
    page = (tmp_path / "00_first.html").read_text()
    assert 'href="01_second.html"' in page and "<math" in page  # links go to pages, TeX became MathML
    assert (tmp_path / book.PLOTLYJS).stat().st_size > 1_000_000
