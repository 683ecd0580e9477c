// Search as you type: fetch the same page the form would load and swap in its results and filters.
// The page works the same without this script; it only saves pressing Enter.
"use strict";
(function () {
  const form = document.getElementById("search-form");
  const box = document.getElementById("q");
  if (!form || !box || !window.fetch || !window.DOMParser) {
    return;
  }
  let timer = null;
  let latest = 0;

  async function refresh() {
    const ticket = ++latest;
    const params = new URLSearchParams(new FormData(form));
    params.delete("page");
    for (const [key, value] of [...params.entries()]) {
      if (!value) params.delete(key);
    }
    const url = "/" + (params.toString() ? "?" + params.toString() : "");
    let response;
    try {
      response = await fetch(url, { headers: { Accept: "text/html" } });
    } catch (error) {
      return; // offline or stopped: the form still submits on Enter
    }
    if (ticket !== latest || !response.ok) {
      return;
    }
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const id of ["results", "facets"]) {
      const fresh = page.getElementById(id);
      const current = document.getElementById(id);
      if (fresh && current) current.replaceWith(document.importNode(fresh, true));
    }
    document.title = page.title;
    history.replaceState(null, "", url);
  }

  box.addEventListener("input", function () {
    clearTimeout(timer);
    if (box.value.trim().length >= 2 || box.value.trim().length === 0) {
      timer = setTimeout(refresh, 250);
    }
  });
  document.addEventListener("keydown", function (event) {
    const typing = event.target instanceof HTMLElement && event.target.matches("input, select, textarea");
    if (event.key === "/" && !typing) {
      event.preventDefault();
      box.focus();
      box.select();
    }
  });
})();
