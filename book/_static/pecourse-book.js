// The course book's own script: no kernel, no network.

// The widget manager's HTMLMath typesets with the MathJax 2 call
// MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the book loads MathJax 3, so answer
// that call with MathJax 3's typesetPromise. MathJax loads deferred, so it is in place by
// DOMContentLoaded, and the widgets render later, on window load.
document.addEventListener("DOMContentLoaded", () => {
  const mathjax = window.MathJax;
  if (!mathjax || !mathjax.startup || mathjax.Hub) return;
  mathjax.Hub = {
    Queue(command) {
      const element = Array.isArray(command) ? command[2] : null;
      if (!element) return;
      // MyST tells MathJax to skip the page body except elements of these classes.
      element.classList.add("mathjax_process");
      mathjax.startup.promise
        .then(() => mathjax.typesetPromise([element]))
        .catch((err) => console.warn("MathJax:", err));
    },
  };
});

// Flashcards flip on click (or Enter / Space).
document.addEventListener("DOMContentLoaded", () => {
  for (const card of document.querySelectorAll(".pc-card")) {
    card.setAttribute("tabindex", "0");
    card.setAttribute("role", "button");
    card.setAttribute("aria-pressed", "false");
    const flip = () => {
      const flipped = card.classList.toggle("pc-flipped");
      card.setAttribute("aria-pressed", String(flipped));
    };
    card.addEventListener("click", (event) => {
      if (event.target.closest("a")) return; // a link inside a card still works
      flip();
    });
    card.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        flip();
      }
    });
  }
});
