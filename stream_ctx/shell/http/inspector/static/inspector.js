// Live updates over server-sent events: numbers, small plots, and a conversation's body.
"use strict";

function drawPlot(svg, values) {
  const line = svg.querySelector("polyline");
  if (values.length < 2) { line.setAttribute("points", ""); return; }
  const top = Math.max(...values, 1e-9);
  const step = 300 / (values.length - 1);
  line.setAttribute("points", values.map((v, n) => `${(n * step).toFixed(1)},${(40 - 38 * v / top).toFixed(1)}`).join(" "));
}

function fillTable(table, rows) {
  table.replaceChildren(...Object.entries(rows).map(([name, value]) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    const td = document.createElement("td");
    th.textContent = name;
    td.textContent = value;
    tr.append(th, td);
    return tr;
  }));
}

async function refreshConversation(version) {
  const body = document.body;
  if (String(version) === body.dataset.version) return;
  body.dataset.version = String(version);
  const response = await fetch(body.dataset.fragment);
  if (response.ok) {
    document.getElementById("live-body").innerHTML = await response.text();
    showTimes(document.getElementById("live-body"));
  }
}

function showTimes(root) {
  for (const el of root.querySelectorAll("time[data-ms]")) {
    const ms = Number(el.dataset.ms);
    if (ms > 0) el.textContent = new Date(ms).toISOString().replace("T", " ").replace(".000Z", "Z");
  }
}

function connect() {
  const status = document.getElementById("live-status");
  const source = new EventSource(document.body.dataset.stream);
  source.onopen = () => { status.textContent = "live"; status.classList.add("on"); };
  source.onerror = () => { status.textContent = "reconnecting"; status.classList.remove("on"); };
  source.onmessage = (message) => {
    const figures = JSON.parse(message.data);
    for (const el of document.querySelectorAll("[data-live]")) {
      const value = figures[el.dataset.live];
      if (value !== undefined) el.textContent = value;
    }
    for (const table of document.querySelectorAll("[data-live-table]")) {
      fillTable(table, figures[table.dataset.liveTable] || {});
    }
    for (const svg of document.querySelectorAll("[data-plot]")) {
      drawPlot(svg, figures.plots[svg.dataset.plot] || []);
    }
    if (figures.conversation_version !== undefined) refreshConversation(figures.conversation_version);
  };
}

function filterList() {
  const search = document.getElementById("search");
  const table = document.getElementById("conversations");
  if (!search || !table) return;
  search.addEventListener("input", () => {
    const wanted = search.value.trim();
    for (const row of table.tBodies[0].rows) row.hidden = !row.dataset.id.includes(wanted);
  });
}

// A reference's text moves from its title (shown without script) to a box placed under it.
function showReferences() {
  const box = document.getElementById("stands-for");
  if (!box) return;
  const refs = document.querySelectorAll("mark.ref[title]");
  for (const mark of refs) {
    mark.dataset.standsFor = mark.title;
    mark.removeAttribute("title");
  }
  const show = (mark) => {
    box.querySelector(".stands-for-head").textContent = `stands for, from item §${mark.dataset.names}:`;
    box.querySelector("pre").textContent = mark.dataset.standsFor;
    const at = mark.getBoundingClientRect();
    box.style.left = `${Math.max(0, at.left + window.scrollX)}px`;
    box.style.top = `${at.bottom + window.scrollY + 4}px`;
    box.hidden = false;
  };
  const hide = (event) => {
    if (!box.contains(event.relatedTarget)) box.hidden = true;
  };
  for (const mark of refs) {
    mark.addEventListener("mouseenter", () => show(mark));
    mark.addEventListener("focus", () => show(mark));
    mark.addEventListener("mouseleave", hide);
    mark.addEventListener("blur", hide);
  }
  box.addEventListener("mouseleave", () => { box.hidden = true; });
}

showTimes(document);
showReferences();
filterList();
connect();
