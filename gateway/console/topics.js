// Topics: the list with the create form, and one topic's partitions, range map and configs.

import {api} from "./api.js";
import {rangeMap, partitionColour} from "./charts.js";
import {clear, fmtBytes, fmtInt, h, numCell, table, textCell} from "./dom.js";
import {confirmDialog, link, messagesHref, noticeAfterNavigation, section, topicHref} from "./ui.js";

const REFRESH_MS = 5000;

function topicsTable(topics) {
  const rows = topics.map((t) => [
    h("td", {"data-field": "name"}, link(topicHref(t.name), t.name),
      t.internal ? h("span", {class: "badge"}, "internal") : null),
    numCell("partitions", t.partitions),
    numCell("records", t.records),
  ]);
  return table("topics-table", [["Name"], ["Partitions", "num"], ["Records", "num"]], rows,
    (i) => ({testid: "topic-row", "data-topic": topics[i].name}));
}

/** "key=value" lines (blank lines and # comments skipped) into a configs object; throws on a bad line. */
function parseConfigs(text) {
  const configs = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const at = line.indexOf("=");
    if (at <= 0) throw new Error(`config line "${line}" is not key=value`);
    configs[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return configs;
}

function readCreateForm(form) {
  const name = form.elements.name.value.trim();
  const partitions = Number(form.elements.partitions.value);
  if (!name) throw new Error("a topic needs a name");
  if (!Number.isInteger(partitions) || partitions < 1) throw new Error("partitions must be a whole number, 1 or more");
  return {name, partitions, configs: parseConfigs(form.elements.configs.value)};
}

async function submitCreate(form, errorBox) {
  errorBox.hidden = true;
  let wanted;
  try {
    wanted = readCreateForm(form);
  } catch (error) {
    errorBox.textContent = error.message;
    errorBox.hidden = false;
    return;
  }
  const extra = Object.keys(wanted.configs).length ? ` and ${Object.keys(wanted.configs).length} config(s)` : "";
  const text = `Create topic "${wanted.name}" with ${wanted.partitions} partition(s)${extra}?`;
  if (!(await confirmDialog("Create topic", text, "Create"))) return;
  try {
    await api.createTopic(wanted.name, wanted.partitions, wanted.configs);
  } catch (error) {
    errorBox.textContent = `Not created: ${error.message}`;
    errorBox.hidden = false;
    return;
  }
  noticeAfterNavigation(`Topic "${wanted.name}" created.`);
  location.hash = topicHref(wanted.name);
}

function createForm() {
  const errorBox = h("p", {class: "form-error", testid: "create-topic-error", hidden: true});
  const form = h("form", {class: "create-form", testid: "create-topic-form", novalidate: true},
    h("label", {}, "Name", h("input", {name: "name", testid: "create-topic-name", required: true,
      autocomplete: "off", placeholder: "orders"})),
    h("label", {}, "Partitions", h("input", {name: "partitions", type: "number", min: 1, value: 1,
      testid: "create-topic-partitions"})),
    h("label", {class: "wide"}, "Configs (key=value, one a line)", h("textarea", {name: "configs", rows: 3,
      testid: "create-topic-configs", placeholder: "retention.ms=86400000\ncleanup.policy=delete"})),
    h("div", {class: "actions"}, h("button", {type: "submit", testid: "create-topic-submit"}, "Create topic…")),
    errorBox);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submitCreate(form, errorBox);
  });
  return form;
}

export function mountList(root, _params, ctx) {
  document.title = "Topics · Martlet";
  const list = h("div", {testid: "topics-body"}, h("p", {class: "muted"}, "Loading…"));
  root.append(h("h1", {}, "Topics"), section("All topics", "topics", list), section("Create a topic", "create-topic", createForm()));
  return ctx.every(REFRESH_MS, async () => {
    const {topics} = await api.topics(ctx.signal);
    topics.sort((a, b) => a.name.localeCompare(b.name));
    clear(list).append(topics.length ? topicsTable(topics) : h("p", {class: "muted", testid: "no-topics"}, "No topics yet."));
  });
}

function partitionsTable(topic) {
  const rows = topic.partitions.map((p) => [
    h("td", {"data-field": "partition"}, h("span", {class: "swatch", style: `background: ${partitionColour(p.partition)}`}),
      link(messagesHref({topic: topic.name, partition: p.partition}), String(p.partition))),
    textCell("slots", `${p.slots[0]}–${p.slots[1]}`),
    numCell("leader", p.leader, String),
    numCell("session", p.session),
    numCell("log_start_offset", p.log_start_offset),
    numCell("high_watermark", p.high_watermark),
    numCell("records", p.high_watermark - p.log_start_offset),
    numCell("checkpoint", p.checkpoint),
    numCell("unpersisted_bytes", p.unpersisted_bytes, fmtBytes),
  ]);
  const columns = [["Partition"], ["Slots"], ["Leader", "num"], ["Session S", "num"], ["Log start", "num"],
    ["High watermark", "num"], ["Records", "num"], ["Persisted C", "num"], ["Unpersisted", "num"]];
  return table("partitions-table", columns, rows, (i) => ({testid: "partition-row", "data-partition": topic.partitions[i].partition}));
}

function rangeLegend(partitions) {
  const sorted = [...partitions].sort((a, b) => a.slots[0] - b.slots[0]);
  return h("ul", {class: "legend", testid: "range-legend"}, sorted.map((p) =>
    h("li", {testid: "range-label", "data-partition": p.partition},
      h("span", {class: "swatch", style: `background: ${partitionColour(p.partition)}`}),
      `P${p.partition}: ${p.slots[0]}–${p.slots[1]}`)));
}

function configsList(configs) {
  const names = Object.keys(configs).sort();
  if (!names.length) return h("p", {class: "muted"}, "No configs reported.");
  return h("dl", {class: "configs", testid: "configs-list"}, names.map((name) =>
    h("div", {class: "config", testid: "config-row", "data-config": name},
      h("dt", {}, name), h("dd", {class: "mono", "data-field": "value"}, configs[name] === "" ? "(empty)" : configs[name]))));
}

async function deleteTopic(name, errorBox) {
  const text = `Delete topic "${name}" and all its records? This cannot be undone.`;
  if (!(await confirmDialog("Delete topic", text, "Delete", {danger: true}))) return;
  try {
    await api.deleteTopic(name);
  } catch (error) {
    errorBox.textContent = `Not deleted: ${error.message}`;
    errorBox.hidden = false;
    return;
  }
  noticeAfterNavigation(`Topic "${name}" deleted.`);
  location.hash = "#/topics";
}

function renderTopic(body, topic) {
  const records = topic.partitions.reduce((sum, p) => sum + p.high_watermark - p.log_start_offset, 0);
  clear(body).append(
    h("p", {class: "subtitle"}, `id `, h("span", {class: "mono", testid: "topic-id"}, topic.topic_id),
      ` · version V `, h("span", {testid: "topic-version"}, String(topic.version)),
      ` · `, h("span", {testid: "topic-partition-count", "data-value": topic.partitions.length},
        `${topic.partitions.length} partition(s)`),
      ` · `, h("span", {testid: "topic-records", "data-value": records}, `${fmtInt(records)} records`)),
    section("Logical range map", "range-map-section",
      h("p", {class: "muted"}, "Keys hash into 65,536 logical slots; each physical partition owns one range."),
      rangeMap(topic.partitions), rangeLegend(topic.partitions)),
    section("Partitions", "partitions", partitionsTable(topic)),
    section("Configs", "configs", configsList(topic.configs)));
}

export function mountTopic(root, params, ctx) {
  const name = params.name;
  document.title = `${name} · Topics · Martlet`;
  const errorBox = h("p", {class: "form-error", testid: "delete-topic-error", hidden: true});
  const body = h("div", {testid: "topic-body"}, h("p", {class: "muted"}, "Loading…"));
  root.append(
    h("div", {class: "title-row"}, h("h1", {}, h("a", {href: "#/topics"}, "Topics"), " / ",
      h("span", {testid: "topic-name"}, name)),
    h("div", {class: "actions"},
      h("a", {class: "button", href: messagesHref({topic: name, partition: 0}), testid: "browse-messages"}, "Browse messages"),
      h("button", {class: "danger", testid: "delete-topic", onclick: () => deleteTopic(name, errorBox)}, "Delete topic…"))),
    errorBox, body);
  return ctx.every(REFRESH_MS, async () => renderTopic(body, await api.topic(name, ctx.signal)));
}
