// Message browser: one partition of one topic, from an offset, from a timestamp, by key, or its
// last records. The query lives in the URL (#/messages?topic=T&partition=P&offset=O) so a search
// can be linked to and reloaded.

import {api} from "./api.js";
import {clear, fmtBytes, fmtTimeMs, h, numCell, table, textCell} from "./dom.js";
import {messagesHref, section} from "./ui.js";

const MODES = [["latest", "Latest records"], ["offset", "From offset"], ["timestamp", "From timestamp"], ["key", "By key"]];
const VALUE_SHOWN_MAX = 300;  // characters of a value shown in the table; the whole value is in its title

function modeOf(params) {
  return MODES.map(([mode]) => mode).find((mode) => mode !== "latest" && params[mode] !== undefined) || "latest";
}

function option(value, label, selected) {
  return h("option", {value, selected: selected || null}, label);
}

async function fillPartitions(select, topic, wanted) {
  clear(select);
  if (!topic) return;
  const detail = await api.topic(topic);
  for (const p of detail.partitions) select.append(option(String(p.partition), String(p.partition), String(p.partition) === wanted));
}

/** A timestamp field: epoch milliseconds, or any date Date.parse reads (ISO 8601 with a zone is safest). */
function timestampMs(text) {
  if (/^\d+$/.test(text)) return text;
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`"${text}" is neither epoch milliseconds nor a date`);
  return String(ms);
}

function readQuery(form) {
  const el = form.elements;
  const query = {topic: el.topic.value, partition: el.partition.value};
  if (!query.topic) throw new Error("pick a topic");
  const mode = el.mode.value;
  const value = el.value.value.trim();
  if (mode === "offset") {
    if (!/^\d+$/.test(value)) throw new Error("the offset is a whole number");
    query.offset = value;
  }
  if (mode === "timestamp") query.timestamp = timestampMs(value);
  if (mode === "key") query.key = el.value.value;
  if (el.limit.value) query.limit = el.limit.value;
  return query;
}

function headersCell(headers) {
  if (!headers.length) return textCell("headers", "—");
  return h("td", {"data-field": "headers"}, h("ul", {class: "headers"},
    headers.map(([key, value]) => h("li", {}, h("span", {class: "header-key"}, key), "=", value ?? "null"))));
}

/** A key or value as text; a long one shows its first characters and a button for the rest. */
function valueCell(field, value, truncated = false) {
  if (value === null) return h("td", {"data-field": field, class: "null"}, "null");
  const cut = truncated ? h("span", {class: "muted"}, " (cut by the broker at 64 Ki characters)") : null;
  if (value.length <= VALUE_SHOWN_MAX) return h("td", {"data-field": field, class: "mono value"}, value, cut);
  const text = h("span", {}, `${value.slice(0, VALUE_SHOWN_MAX)}…`);
  const more = h("button", {type: "button", class: "link-button", testid: "show-more"}, "show all");
  more.addEventListener("click", () => {
    text.textContent = value;
    more.remove();
  });
  return h("td", {"data-field": field, class: "mono value"}, text, " ", more, cut);
}

function messagesTable(messages) {
  const rows = messages.map((m) => [
    numCell("offset", m.offset), h("td", {"data-field": "timestamp", "data-value": m.timestamp}, fmtTimeMs(m.timestamp)),
    valueCell("key", m.key), valueCell("value", m.value, m.truncated), headersCell(m.headers), numCell("value_bytes", m.value_bytes, fmtBytes),
  ]);
  return table("messages-table", [["Offset", "num"], ["Timestamp"], ["Key"], ["Value"], ["Headers"], ["Size", "num"]],
    rows, (i) => ({testid: "message-row", "data-offset": messages[i].offset}));
}

async function search(results, params, ctx) {
  clear(results).append(h("p", {class: "muted"}, "Searching…"));
  const query = {topic: params.topic, partition: params.partition || "0"};
  for (const key of ["offset", "timestamp", "key", "limit"]) if (params[key] !== undefined) query[key] = params[key];
  try {
    const {messages} = await api.messages(query, ctx.signal);
    clear(results).append(h("p", {class: "muted", testid: "message-count", "data-value": messages.length},
      `${messages.length} record(s) from partition ${query.partition} of ${query.topic}`),
    messages.length ? messagesTable(messages) : h("p", {testid: "no-messages"}, "No records match."));
  } catch (error) {
    if (ctx.alive) clear(results).append(h("p", {class: "form-error", testid: "messages-error"}, error.message));
  }
}

function buildForm(params) {
  const mode = modeOf(params);
  const value = mode === "latest" ? "" : params[mode];
  return h("form", {class: "query-form", testid: "messages-form", novalidate: true},
    h("label", {}, "Topic", h("select", {name: "topic", testid: "msg-topic"})),
    h("label", {}, "Partition", h("select", {name: "partition", testid: "msg-partition"})),
    h("label", {}, "Find", h("select", {name: "mode", testid: "msg-mode"}, MODES.map(([m, label]) => option(m, label, m === mode)))),
    h("label", {class: "grow"}, "Offset, timestamp (ms or ISO date) or key",
      h("input", {name: "value", testid: "msg-value", value: value ?? "", autocomplete: "off"})),
    h("label", {}, "Limit", h("input", {name: "limit", type: "number", min: 1, max: 500, value: params.limit || 50, testid: "msg-limit"})),
    h("div", {class: "actions"}, h("button", {type: "submit", testid: "msg-search"}, "Show")));
}

async function fillTopics(form, params, ctx) {
  const {topics} = await api.topics(ctx.signal);
  const names = topics.map((t) => t.name).sort();
  const chosen = params.topic && names.includes(params.topic) ? params.topic : names[0];
  for (const name of names) form.elements.topic.append(option(name, name, name === chosen));
  await fillPartitions(form.elements.partition, chosen, params.partition || "0");
  form.elements.topic.addEventListener("change", () => fillPartitions(form.elements.partition, form.elements.topic.value, "0"));
}

export function mount(root, params, ctx) {
  document.title = "Messages · Martlet";
  const form = buildForm(params);
  const formError = h("p", {class: "form-error", testid: "msg-form-error", hidden: true});
  const results = h("div", {testid: "messages-body"});
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      formError.hidden = true;
      const query = readQuery(form);
      const href = messagesHref(query);
      // The same query again: no hashchange, so search here (and mark the view ready as the router would).
      if (location.hash === href) search(results, query, ctx).then(() => root.setAttribute("data-ready", "true"));
      else location.hash = href;
    } catch (error) {
      formError.textContent = error.message;
      formError.hidden = false;
    }
  });
  root.append(h("h1", {}, "Messages"), section("Query", "messages-query", form, formError), section("Records", "records", results));
  const ready = fillTopics(form, params, ctx).then(() => form.setAttribute("data-ready", "true"));
  return params.topic ? Promise.all([ready, search(results, params, ctx)]) : ready;
}
