// The theme's download menu links to the page's source with target="_blank", which
// opens a notebook as raw JSON in a new tab. For notebooks, save the file instead; the
// chapter's course package (.whl, book/_ext/learner_links.py) is saved the same way.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll("a.btn-download-wheel-button")) {
    link.setAttribute("download", (link.getAttribute("href") || "").split("/").pop());
    link.removeAttribute("target");
  }
  for (const link of document.querySelectorAll("a.btn-download-source-button")) {
    const href = link.getAttribute("href") || "";
    if (!href.split(/[?#]/)[0].endsWith(".ipynb")) continue;
    link.setAttribute("download", href.split(/[?#]/)[0].split("/").pop());
    link.removeAttribute("target");
    const tip = "Download the exercise notebook (.ipynb)";
    link.setAttribute("title", tip);
    link.setAttribute("data-bs-original-title", tip);  // the tooltip, once Bootstrap set it up
  }
});
