// moss web view: live updates, times for people, and the board's hands (drag and drop, keys).
// Pages work without this file: every action is a form, every page a link. With it:
// - a page whose <body data-live> names kinds of artifacts asks what changed when the server's
//   event stream (/events) says files of those kinds changed, sending the render id of what it
//   shows (<main data-render>); the answer names only the changed parts (a card, a count, a
//   column's order) or, when more changed, the whole content. Focus, open details and what a
//   person typed but did not send are kept;
// - times read "5 min ago", the exact local time on hover;
// - on the board, cards move by drag and drop or by keys (Space picks a card up, arrows choose
//   its column, Space puts it there, Escape puts it back), through the same form posts as the
//   task page's buttons;
// - a search result's full record opens in place.
"use strict";
(() => {
  const body = document.body;
  const kinds = (body.dataset.live || "").split(" ").filter(Boolean);
  const state = document.querySelector(".live-state");
  const main = () => document.querySelector("main");
  let render = main()?.dataset.render || "";
  let busy = false, again = false, version = 0;
  let holding = 0;  // a card picked up, or a move on its way: the board waits before it changes

  // ------------------------------------------------------------------ times

  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  const plural = (n, unit) => `${n} ${unit}${n === 1 ? "" : "s"}`;
  function relative(at, dateOnly) {
    const seconds = (Date.now() - at.getTime()) / 1000;
    const size = Math.abs(seconds);
    const say = (text) => (seconds < 0 ? `in ${text}` : `${text} ago`);
    const day = at.toLocaleDateString(undefined, { day: "numeric", month: "short", year: at.getFullYear() === new Date().getFullYear() ? undefined : "numeric" });
    if (dateOnly) return size < 86400 ? "today" : size < 2 * 86400 && seconds > 0 ? "yesterday" : day;
    if (size < 45) return "just now";
    if (size < 3600) return say(`${Math.round(size / 60)} min`);
    if (size < 86400) return say(plural(Math.round(size / 3600), "hour"));
    if (size < 7 * 86400) return say(plural(Math.round(size / 86400), "day"));
    return day;
  }
  function humanize(root) {
    for (const time of root.querySelectorAll("time[datetime]:not(.clock)")) {
      const stamp = time.getAttribute("datetime");
      const at = new Date(stamp);
      if (Number.isNaN(at.getTime())) continue;
      const dateOnly = stamp.length === 10;
      time.textContent = relative(at, dateOnly);
      time.title = `${dateOnly ? at.toLocaleDateString() : exact.format(at)} (${stamp})`;
    }
  }
  humanize(document);
  setInterval(() => humanize(document), 60_000);

  // ------------------------------------------------------------------ messages to the person

  const toast = document.querySelector(".toast");
  let toastTimer = 0;
  function say(text, error = false) {
    if (!toast) return;
    toast.textContent = text;
    toast.classList.toggle("error", error);
    toast.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { toast.hidden = true; }, error ? 8000 : 3000);
  }

  // ------------------------------------------------------------------ what a person is typing

  document.addEventListener("input", (event) => { if (event.target.closest?.("main form")) event.target.dataset.dirty = "1"; }, true);
  document.addEventListener("change", (event) => { if (event.target.closest?.("main form")) event.target.dataset.dirty = "1"; }, true);
  document.addEventListener("submit", (event) => { for (const field of event.target.querySelectorAll("[data-dirty]")) delete field.dataset.dirty; }, true);
  const holdsDirty = (node) => node.matches?.("[data-dirty]") || !!node.querySelector?.("[data-dirty]");
  const typing = () => {
    const field = document.activeElement;
    return !!(field && field.closest("main form") && field.matches("input, textarea, select")) || [...document.querySelectorAll("main textarea[data-dirty]")].some((t) => t.value.trim());
  };

  // ------------------------------------------------------------------ applying what changed

  const byKey = (key) => main().querySelector(`[data-key="${CSS.escape(key)}"]`);
  function element(html) {
    const box = document.createElement("template");
    box.innerHTML = html;  // our own server's escaped markup
    return box.content.firstElementChild;
  }
  function focusState() {
    const field = document.activeElement;
    if (!field || field === document.body || !main().contains(field)) return null;
    return { field, key: field.closest("[data-key]")?.dataset.key, name: field.getAttribute("name"), link: field.matches("a") ? field.className : null, id: field.id };
  }
  function restoreFocus(kept) {
    if (!kept) return;
    if (kept.field.isConnected) { if (document.activeElement !== kept.field) kept.field.focus({ preventScroll: true }); return; }
    const holder = kept.key ? byKey(kept.key) : null;
    let target = kept.id ? document.getElementById(kept.id) : null;
    if (!target && holder) target = (kept.name && holder.querySelector(`[name="${CSS.escape(kept.name)}"]`)) || (kept.link !== null && holder.querySelector("a")) || holder;
    target?.focus({ preventScroll: true });
  }
  function carryTyping(from, into) {
    // Whatever a person typed and did not send stays, in the same field of the same form.
    for (const field of from.querySelectorAll("[data-dirty][name]")) {
      const form = field.closest("form");
      const twin = [...into.querySelectorAll(`[name="${CSS.escape(field.name)}"]`)].find((other) => other.closest("form")?.getAttribute("action") === form?.getAttribute("action"));
      if (!twin) continue;
      if (field.type === "checkbox" || field.type === "radio") twin.checked = field.checked; else twin.value = field.value;
      twin.dataset.dirty = "1";
    }
  }
  function openKeys(root) {
    return new Set([...root.querySelectorAll("details[open]")].map((d) => d.closest("[data-key]")?.dataset.key || d.closest("[data-id]")?.dataset.id).filter(Boolean));
  }
  function apply(diff) {
    const page = main();
    const kept = focusState();
    if (diff.main !== undefined) {
      const fresh = document.createElement("main");
      fresh.innerHTML = diff.main;  // our own server's escaped markup
      const open = openKeys(page);
      carryTyping(page, fresh);
      for (const details of fresh.querySelectorAll("details")) {
        const key = details.closest("[data-key]")?.dataset.key || details.closest("[data-id]")?.dataset.id;
        if (key && open.has(key)) details.open = true;
      }
      page.replaceChildren(...fresh.childNodes);
    } else {
      const fresh = {};
      for (const [key, html] of Object.entries(diff.parts || {})) fresh[key] = element(html);
      const placed = new Set();
      for (const [list, keys] of Object.entries(diff.lists || {})) {
        const box = page.querySelector(`[data-list="${CSS.escape(list)}"]`);
        if (!box) continue;
        const nodes = keys.map((key) => {
          placed.add(key);
          const old = byKey(key);
          return old && (holdsDirty(old) || old.classList.contains("lifted")) ? old : fresh[key] || old;
        }).filter(Boolean);
        box.replaceChildren(...nodes);
      }
      for (const [key, node] of Object.entries(fresh)) {
        if (placed.has(key) || !node) continue;
        const old = byKey(key);
        if (!old || holdsDirty(old)) continue;
        if (old.matches("details") && old.open) node.open = true;
        for (const details of old.querySelectorAll("details[open]")) node.querySelector(`details.${CSS.escape(details.classList[0] || "x")}`)?.setAttribute("open", "");
        old.replaceWith(node);
      }
    }
    if (diff.title) document.title = document.title.replace(/^[^·]*/, `${diff.title} `);
    restoreFocus(kept);
    humanize(page);
    body.dataset.version = String(version);
  }

  async function refresh() {
    if (busy || holding) { again = true; return; }
    busy = true; again = false;
    try {
      const answer = await fetch(location.href, { headers: { "X-Moss-Live": render || "-" }, credentials: "same-origin" });
      if (!answer.ok || !(answer.headers.get("content-type") || "").startsWith("application/json")) return;
      const diff = await answer.json();
      if (diff.main !== undefined && typing()) { again = true; return; }  // never swap the page under a person's typing
      apply(diff);
      render = diff.render;
      main().dataset.render = render;
    } catch (error) {
      again = true;
    } finally {
      busy = false;
      if (again && !typing() && !holding) setTimeout(refresh, 200);
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
    document.addEventListener("focusout", () => { if (again) setTimeout(() => { if (!typing()) refresh(); }, 0); });
  }

  // ------------------------------------------------------------------ search: a record in place

  document.addEventListener("toggle", async (event) => {
    const details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open || !details.dataset.expand || details.dataset.loaded) return;
    details.dataset.loaded = "1";
    const answer = await fetch(details.dataset.expand, { credentials: "same-origin" });
    const target = details.querySelector(".expanded");
    if (answer.ok && target) { target.innerHTML = await answer.text(); humanize(target); }  // our own server's escaped markup
  }, true);

  // ------------------------------------------------------------------ the board

  const board = () => document.querySelector("[data-board]");
  if (!board()) return;
  const token = () => document.querySelector('meta[name="moss-csrf"]')?.content || "";
  const columnName = (status) => document.getElementById(`col-${status}`)?.querySelector("a")?.textContent || status;
  const lists = () => [...board().querySelectorAll(".cards")];

  async function post(action, fields) {
    const answer = await fetch(action, {
      method: "POST",
      body: new URLSearchParams({ csrf: token(), ...fields }),
      headers: { "X-Moss-Fetch": "1", Accept: "application/json" },
      credentials: "same-origin",
    });
    let data = {};
    try { data = await answer.json(); } catch (error) { data = { error: { code: String(answer.status), message: "the server's answer cannot be read" } }; }
    return { ok: answer.ok, data };
  }

  const dialog = document.querySelector("dialog.reason-dialog");
  function askReason(card, status) {
    if (!dialog) return Promise.resolve(null);
    return new Promise((resolve) => {
      const field = dialog.querySelector("textarea");
      field.value = "";
      dialog.querySelector("h2").textContent = `Why move “${card.querySelector(".title")?.textContent || card.dataset.task}” back to ${columnName(status)}?`;
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" && field.value.trim() ? field.value : null), { once: true });
      dialog.returnValue = "";
      dialog.showModal();
      field.focus();
    });
  }

  // Move a card to `status`: shown there at once, then posted as the task page's Move form
  // posts (claims.set_task_status); put back, with the reason said, when the board refuses.
  async function move(card, status, origin) {
    holding += 1;
    try {
      await moving(card, status, origin);
    } finally {
      holding -= 1;
      if (!holding && again) refresh();
    }
  }
  async function moving(card, status, origin) {
    const task = card.dataset.task;
    const back = () => {
      if (origin.parent) origin.parent.insertBefore(card, origin.next && origin.next.parentNode === origin.parent ? origin.next : null);
      card.dataset.status = origin.status;
    };
    const target = board().querySelector(`.cards[data-status="${CSS.escape(status)}"]`);
    if (target && card.parentNode !== target) target.prepend(card);
    card.dataset.status = status;
    const link = card.querySelector("a.title");
    link?.focus({ preventScroll: true });
    let { ok, data } = await post(`/tasks/${encodeURIComponent(task)}/move`, { status });
    if (!ok && data?.error?.details?.field === "reason") {
      const reason = await askReason(card, status);
      if (reason === null) { back(); link?.focus(); say("Not moved."); return; }
      ({ ok, data } = await post(`/tasks/${encodeURIComponent(task)}/move`, { status, reason }));
    }
    if (!ok) {
      back();
      link?.focus({ preventScroll: true });
      say(`${data?.error?.code || "ERROR"}: ${data?.error?.message || "not moved"}`, true);
      return;
    }
    say(`Moved to ${columnName(status)}.`);
    link?.focus({ preventScroll: true });
  }

  // Drag and drop.
  let dragged = null;
  document.addEventListener("dragstart", (event) => {
    const card = event.target.closest?.(".card[draggable]");
    if (!card) return;
    dragged = { card, origin: { parent: card.parentNode, next: card.nextSibling, status: card.dataset.status } };
    event.dataTransfer.setData("text/plain", card.dataset.task);
    event.dataTransfer.effectAllowed = "move";
    card.classList.add("dragging");
  });
  document.addEventListener("dragend", () => {
    dragged?.card.classList.remove("dragging");
    for (const list of lists()) list.classList.remove("drop-target");
    dragged = null;
  });
  const dropList = (event) => event.target.closest?.(".column")?.querySelector(".cards");
  document.addEventListener("dragover", (event) => {
    const list = dropList(event);
    if (!dragged || !list) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    for (const other of lists()) other.classList.toggle("drop-target", other === list);
  });
  document.addEventListener("drop", (event) => {
    const list = dropList(event);
    if (!dragged || !list) return;
    event.preventDefault();
    const { card, origin } = dragged;
    card.classList.remove("dragging");
    list.classList.remove("drop-target");
    dragged = null;
    if (list.dataset.status !== origin.status) move(card, list.dataset.status, origin);
  });

  // Keys: arrows between cards; Space picks a card up, arrows choose its column, Space or
  // Enter puts it there, Escape puts it back.
  let lifted = null;
  const cardOf = (node) => node?.closest?.(".card");
  const focusCard = (card) => card?.querySelector("a.title")?.focus();
  function neighbour(card, step) {
    const all = lists();
    let index = all.indexOf(card.parentNode) + step;
    while (index >= 0 && index < all.length) {
      const place = Math.min([...card.parentNode.children].indexOf(card), all[index].children.length - 1);
      if (all[index].children.length) return all[index].children[Math.max(0, place)];
      index += step;
    }
    return null;
  }
  function drop(cancel) {
    const { card, origin } = lifted;
    lifted = null;
    holding -= 1;
    card.classList.remove("lifted");
    const status = card.parentNode.dataset.status;
    if (cancel || status === origin.status) {
      origin.parent.insertBefore(card, origin.next && origin.next.parentNode === origin.parent ? origin.next : null);
      focusCard(card);
      say(cancel ? "Put back." : "Not moved.");
      if (!holding && again) refresh();
      return;
    }
    move(card, status, origin);
  }
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const card = cardOf(document.activeElement);
    if (lifted) {
      const all = lists();
      if (event.key === "ArrowLeft" || event.key === "ArrowRight") {
        const index = all.indexOf(lifted.card.parentNode) + (event.key === "ArrowRight" ? 1 : -1);
        if (index >= 0 && index < all.length) {
          all[index].prepend(lifted.card);
          focusCard(lifted.card);
          say(`Over ${columnName(all[index].dataset.status)}.`);
        }
        event.preventDefault();
      } else if (event.key === " " || event.key === "Enter") {
        event.preventDefault();
        drop(false);
      } else if (event.key === "Escape") {
        event.preventDefault();
        drop(true);
      }
      return;
    }
    if (card && event.key === " ") {
      event.preventDefault();
      lifted = { card, origin: { parent: card.parentNode, next: card.nextSibling, status: card.dataset.status } };
      holding += 1;
      card.classList.add("lifted");
      say(`Picked up ${card.dataset.task}: ← → choose a column, Space puts it there, Escape puts it back.`);
      return;
    }
    if (card && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
      const next = event.key === "ArrowDown" ? card.nextElementSibling : card.previousElementSibling;
      if (next) { focusCard(next); event.preventDefault(); }
      return;
    }
    if (card && (event.key === "ArrowLeft" || event.key === "ArrowRight")) {
      const next = neighbour(card, event.key === "ArrowRight" ? 1 : -1);
      if (next) { focusCard(next); event.preventDefault(); }
      return;
    }
    const field = event.target.closest?.("input, textarea, select, [contenteditable]");
    if (field) return;
    if (event.key === "n") {
      const details = document.querySelector("details.new-task");
      if (details) { details.open = true; details.querySelector('input[name="title"]')?.focus(); event.preventDefault(); }
    } else if (event.key === "/") {
      const search = document.querySelector('header input[type="search"]');
      if (search) { search.focus(); event.preventDefault(); }
    }
  });

  // More cards in a column: the same view with a longer column, fetched as what changed.
  document.addEventListener("click", (event) => {
    const more = event.target.closest?.("a.show-more");
    if (!more || !kinds.length) return;
    event.preventDefault();
    history.replaceState(null, "", more.href);
    refresh();
  });
})();
