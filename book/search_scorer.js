// The book's search ranking (html_search_scorer in book/conf.py; Sphinx puts this file in
// language_data.js on the search page). Sphinx's own weights, plus one rule: a reader
// searching the course wants its chapters and exercises first, flashcards next, and the
// package's source listings last.
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    if (/^(notebooks|exercises)\//.test(docname)) return score + 20;
    if (docname.startsWith("flashcards/")) return score + 5;
    if (docname.startsWith("source/")) return score - 10;
    return score;
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
