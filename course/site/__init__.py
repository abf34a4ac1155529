"""The site: MkDocs hooks (hooks.py, the one hook mkdocs.yml names) and what they render.

- badge.py: the verification badge under a page's title (and its compute-sanitizer sentence);
- results.py: generated results sections, recorded outputs and the record summary;
- plots.py: the charts of recorded rows (drawn by course/svg.py);
- kernel_index.py: the index of every file under kernels/;
- tabs.py: tabs kept inside fenced code blocks;
- overview.py: what the overview pages generate (the chapter table, the clone command, exercise lists and counts);
- search_index.py: the search index trimmed after the build; print_contents.py: the whole-course page's contents.

Pages' directives (`<!-- course:... -->`, `<!-- claim: ... -->`, `<!-- prereqs: -->`, `<!--pytest.mark.*-->`)
are parsed by course/directives.py, below the site, because the harness reads them too (the GPU run
finds the programs a page's results and claims need; course/claims.py checks claims). Claims are
course/claims.py; results headlines are course/headline.py. Every one of them reads the GPU
record through course/record.py's queries.
"""
