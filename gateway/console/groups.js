// Consumer groups: the list, and one group's members, offsets, lag and lag chart over time.

import {api} from "./api.js";
import {lagChart} from "./charts.js";
import {clear, fmtInt, h, numCell, table, textCell} from "./dom.js";
import {groupHref, link, messagesHref, section, topicHref} from "./ui.js";

const REFRESH_MS = 5000;
const SAMPLES_MAX = 720;  // as many as the broker keeps (an hour at one sample per 5 s)

function groupsTable(groups) {
  const rows = groups.map((g) => [
    h("td", {"data-field": "group_id"}, link(groupHref(g.group_id), g.group_id)),
    textCell("state", g.state),
    textCell("protocol_type", g.protocol_type || "—"),
    numCell("members", g.members),
    numCell("lag", g.lag),
  ]);
  return table("groups-table", [["Group"], ["State"], ["Protocol type"], ["Members", "num"], ["Lag", "num"]], rows,
    (i) => ({testid: "group-row", "data-group": groups[i].group_id}));
}

export function mountList(root, _params, ctx) {
  document.title = "Consumer groups · Martlet";
  const list = h("div", {testid: "groups-body"}, h("p", {class: "muted"}, "Loading…"));
  root.append(h("h1", {}, "Consumer groups"), section("All groups", "groups", list));
  return ctx.every(REFRESH_MS, async () => {
    const {groups} = await api.groups(ctx.signal);
    groups.sort((a, b) => a.group_id.localeCompare(b.group_id));
    clear(list).append(groups.length ? groupsTable(groups) : h("p", {class: "muted", testid: "no-groups"}, "No groups yet."));
  });
}

function assignmentText(assignment) {
  const byTopic = new Map();
  for (const {topic, partition} of assignment) byTopic.set(topic, [...(byTopic.get(topic) || []), partition]);
  return [...byTopic].map(([topic, parts]) => `${topic} [${parts.sort((a, b) => a - b).join(", ")}]`).join("; ") || "—";
}

function membersTable(members) {
  if (!members.length) return h("p", {class: "muted", testid: "no-members"}, "No members (the group is not consuming now).");
  const rows = members.map((m) => [
    h("td", {class: "mono", "data-field": "member_id"}, m.member_id),
    textCell("client_id", m.client_id), textCell("host", m.host), textCell("assignment", assignmentText(m.assignment)),
  ]);
  return table("members-table", [["Member"], ["Client id"], ["Host"], ["Assignment"]], rows,
    (i) => ({testid: "member-row", "data-member": members[i].member_id}));
}

function offsetsTable(offsets) {
  if (!offsets.length) return h("p", {class: "muted", testid: "no-offsets"}, "No committed offsets.");
  const sorted = [...offsets].sort((a, b) => a.topic.localeCompare(b.topic) || a.partition - b.partition);
  const rows = sorted.map((o) => [
    h("td", {"data-field": "topic"}, link(topicHref(o.topic), o.topic)),
    h("td", {class: "num", "data-field": "partition"},
      link(messagesHref({topic: o.topic, partition: o.partition, offset: o.committed}), String(o.partition))),
    numCell("committed", o.committed), numCell("high_watermark", o.high_watermark), numCell("lag", o.lag),
  ]);
  return table("offsets-table", [["Topic"], ["Partition", "num"], ["Committed", "num"], ["High watermark", "num"],
    ["Lag", "num"]], rows, (i) => ({testid: "offset-row", "data-topic": sorted[i].topic, "data-partition": sorted[i].partition}));
}

/** The broker's lag_history (a sample every 5 s) and the samples this page took, in time order. */
function chartPoints(history, samples) {
  return [...history, ...samples].sort((a, b) => a.time - b.time).slice(-2 * SAMPLES_MAX);
}

function renderGroup(body, group, samples) {
  const lag = group.offsets.reduce((sum, o) => sum + o.lag, 0);
  samples.push({time: Date.now() / 1000, lag});
  if (samples.length > SAMPLES_MAX) samples.shift();
  const points = chartPoints(group.lag_history, samples);
  clear(body).append(
    h("p", {class: "subtitle"}, "state ", h("span", {class: "badge", testid: "group-state"}, group.state),
      " · protocol ", h("span", {testid: "group-protocol"}, `${group.protocol_type || "—"}/${group.protocol || "—"}`),
      " · ", h("span", {testid: "group-member-count", "data-value": group.members.length}, `${group.members.length} member(s)`),
      " · total lag ", h("span", {testid: "group-lag", "data-value": lag}, fmtInt(lag))),
    section("Lag over time", "lag", lagChart(points),
      h("p", {class: "muted", testid: "lag-points"}, `${points.length} sample(s): the broker's history (every 5 s) and this page's own.`)),
    h("div", {class: "columns"},
      section("Members and assignment", "members", membersTable(group.members)),
      section("Committed offsets and lag", "offsets", offsetsTable(group.offsets))));
}

export function mountGroup(root, params, ctx) {
  const id = params.name;
  document.title = `${id} · Consumer groups · Martlet`;
  const body = h("div", {testid: "group-body"}, h("p", {class: "muted"}, "Loading…"));
  const samples = [];
  root.append(h("h1", {}, h("a", {href: "#/groups"}, "Consumer groups"), " / ", h("span", {testid: "group-id"}, id)), body);
  return ctx.every(REFRESH_MS, async () => renderGroup(body, await api.group(id, ctx.signal), samples));
}
