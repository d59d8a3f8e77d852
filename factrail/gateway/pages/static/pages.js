// Refreshes a page whose <main> has data-refresh="<seconds>": fetches the same page and swaps
// its <main> in place; paused while the tab is hidden, stopped when the sign-in lapses.
(function () {
  "use strict";
  var main = document.querySelector("main[data-refresh]");
  if (!main || !window.fetch || !window.DOMParser) return;
  var every = (parseInt(main.getAttribute("data-refresh"), 10) || 10) * 1000;
  var timer = null;
  var busy = false;
  var stopped = false;

  function schedule() {
    clearTimeout(timer);
    if (!stopped && !document.hidden) timer = setTimeout(refresh, every);
  }

  function refresh() {
    if (busy || stopped || document.hidden) return;
    busy = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store", redirect: "error" })
      .then(function (answer) {
        if (answer.status === 401) stopped = true;
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        return answer.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var current = document.querySelector("main");
        if (fresh && current) current.replaceWith(document.adoptNode(fresh));
      })
      .catch(function () {
        var current = document.querySelector("main");
        if (current) current.classList.add("stale");
      })
      .then(function () {
        busy = false;
        schedule();
      });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) clearTimeout(timer);
    else refresh();
  });
  schedule();
})();
