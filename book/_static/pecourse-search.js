// Search snippets from file://. Sphinx's search fetches each result's page to cut a snippet
// from it, and a browser refuses fetch() on file:// (one console error per result, no
// snippet). pecourse.book writes the text of every page, with its sections' ids, into
// pecourse-search-pages.js (window.PECOURSE_PAGES, keyed by the page's path in the site);
// this file answers Sphinx's fetch of a book page from there, and leaves any other request
// to the browser.
(() => {
  const pages = () => window.PECOURSE_PAGES || {};
  const fetchFromNetwork = window.fetch.bind(window);
  window.fetch = (resource, options) => {
    const url = new URL(String(resource), document.baseURI);
    const root = new URL(document.documentElement.dataset.content_root || "./", document.baseURI);
    if (url.href.startsWith(root.href)) {
      const path = decodeURIComponent(url.pathname.slice(root.pathname.length));
      const page = pages()[path];
      if (page !== undefined)
        return Promise.resolve(
          new Response(page, { status: 200, headers: { "Content-Type": "text/html" } }),
        );
    }
    return fetchFromNetwork(resource, options);
  };
})();
