// Render the maths that pymdownx.arithmatex marks up (generic mode), also after instant navigation.
document$.subscribe(() => {
  for (const el of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: true,
    });
  }
});
