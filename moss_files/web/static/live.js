// moss web view: live updates and in-place expansion. Pages work without this file; with it,
// a page whose <body data-live> names kinds of artifacts reloads its <main> when the server's
// event stream (/events) says files of those kinds changed, and a search result opens in place.
"use strict";
(() => {
  const body = document.body;
  const kinds = (body.dataset.live || "").split(" ").filter(Boolean);
  const state = document.querySelector(".live-state");
  let busy = false, again = false, version = 0;

  const typing = () => {
    const field = document.activeElement;
    const filled = [...document.querySelectorAll("main textarea")].some((t) => t.value.trim());
    return filled || (field && field.closest("main form") && field.matches("input, textarea, select"));
  };

  const openDetails = () => [...document.querySelectorAll("main details[open]")].map((d) => d.closest("[data-id]")?.dataset.id).filter(Boolean);

  async function refresh() {
    if (busy || typing()) { again = true; return; }  // never swap the page under a person's typing
    busy = true; again = false;
    try {
      const answer = await fetch(location.href, { headers: { "X-Moss-Live": "1" }, credentials: "same-origin" });
      if (!answer.ok || !(answer.headers.get("content-type") || "").startsWith("text/html")) return;
      const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").querySelector("main");
      const open = openDetails();
      if (fresh) document.querySelector("main").replaceWith(fresh);
      for (const id of open) fresh?.querySelector(`[data-id="${CSS.escape(id)}"] details`)?.setAttribute("open", "");
      body.dataset.version = String(version);
    } catch (error) {
      again = true;
    } finally {
      busy = false;
      if (again) setTimeout(refresh, 200);
    }
  }

  if (kinds.length && window.EventSource) {
    let opened = false;
    const stream = new EventSource("/events");
    stream.addEventListener("open", () => {
      if (opened) refresh();  // back after a lost connection: what changed meanwhile
      opened = true;
      body.dataset.stream = "open";
      if (state) state.textContent = "live";
    });
    stream.addEventListener("error", () => {
      body.dataset.stream = "closed";
      if (state) state.textContent = "offline";
    });
    stream.addEventListener("change", (event) => {
      const change = JSON.parse(event.data);
      version = change.version;
      if (kinds.includes("*") || change.kinds.some((kind) => kinds.includes(kind))) refresh();
    });
    document.addEventListener("focusout", () => { if (again) setTimeout(refresh, 0); });
  }

  // A search result's full record, fetched when it is first opened.
  document.addEventListener("toggle", async (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !details.dataset.expand || details.dataset.loaded) return;
    details.dataset.loaded = "1";
    const answer = await fetch(details.dataset.expand, { credentials: "same-origin" });
    const target = details.querySelector(".expanded");
    if (answer.ok && target) target.innerHTML = await answer.text();  // our own server's escaped markup
  }, true);
})();
