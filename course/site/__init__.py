"""The site: MkDocs hooks (hooks.py, the one hook mkdocs.yml names) and what they render.

- directives.py: one parser for every `<!-- course:... -->`, `<!-- claim: ... -->`, `<!-- prereqs: -->`
  and `<!--pytest.mark.*-->` form, and the table of directive kinds;
- badge.py: the verification badge under a page's title (and its compute-sanitizer sentence);
- results.py: generated results sections, recorded outputs and the record summary;
- plots.py: the charts of recorded rows (drawn by course/svg.py);
- kernel_index.py: the index of every file under kernels/;
- tabs.py: tabs kept inside fenced code blocks.

Claims are course/claims.py; results headlines are course/headline.py. Every one of them reads the GPU
record through course/record.py's queries.
"""
