// The book's search ranking (html_search_scorer in book/conf.py; Sphinx puts this file in
// language_data.js on the search page). Sphinx scores a page by which words it holds, not how
// often, so many pages tie; on top of Sphinx's own weights:
// - a reader searching the course wants its chapters and exercises first, flashcards next,
//   and the package's source listings last;
// - a result whose title (a section's, for a result in a section) holds every word of the
//   query, and a page that uses the query's words together often, rank higher. The pages'
//   text is the one the search page already loaded for snippets (pecourse-search-pages.js).
var Scorer = {
  score: (result) => {
    const [docname, title, , , score] = result;
    let boost = 0;
    if (/^(notebooks|exercises)\//.test(docname)) boost += 20;
    else if (docname.startsWith("flashcards/")) boost += 5;
    else if (docname.startsWith("source/")) boost -= 10;
    const query = (new URLSearchParams(window.location.search).get("q") || "")
      .toLowerCase()
      .trim()
      .replace(/\s+/g, " ");
    if (query) {
      const words = query.split(" ");
      const heading = (title || "").toLowerCase();
      if (words.length > 1 && words.every((word) => heading.includes(word))) boost += 15;
      const text = ((window.PECOURSE_PAGES || {})[docname + ".html"] || "").toLowerCase();
      const uses = text.split(query).length - 1; // the query as written, words together
      boost += Math.min(10, 3 * Math.log2(1 + uses));
    }
    return score + boost;
  },
  // Sphinx's defaults (sphinx/themes/basic/static/searchtools.js), unchanged.
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
