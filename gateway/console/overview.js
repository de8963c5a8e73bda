// Overview: this broker's identity and load, its store, and every broker of the cluster with its load.

import {api} from "./api.js";
import {clear, fmtBytes, fmtDuration, fmtInt, h, numCell, table, textCell} from "./dom.js";
import {section} from "./ui.js";

const REFRESH_MS = 3000;

function stat(label, testid, value, raw) {
  return h("div", {class: "stat"}, h("div", {class: "stat-label"}, label),
    h("div", {class: "stat-value", testid, "data-value": raw ?? value}, value));
}

function memoryShare(memory) {
  const share = memory.budget_bytes > 0 ? Math.min(1, memory.used_bytes / memory.budget_bytes) : 0;
  return {share, level: share > 0.9 ? "high" : share > 0.7 ? "mid" : "low"};
}

function memoryBar(memory) {
  const used = memory.used_bytes;
  const budget = memory.budget_bytes;
  const {share, level} = memoryShare(memory);
  return h("div", {class: "meter-row"},
    h("div", {class: "meter", testid: "memory-bar", "data-used": used, "data-budget": budget},
      h("div", {class: `meter-fill ${level}`, style: `width: ${(share * 100).toFixed(1)}%`})),
    h("span", {testid: "memory-text"}, `${fmtBytes(used)} of ${fmtBytes(budget)} (${(share * 100).toFixed(1)}%)`));
}

function storeBlock(store) {
  const health = store.healthy ? h("span", {class: "badge ok", testid: "store-health"}, "healthy")
    : h("span", {class: "badge bad", testid: "store-health"}, "unhealthy");
  return h("dl", {class: "facts"},
    h("dt", {}, "Kind"), h("dd", {testid: "store-kind"}, store.kind),
    h("dt", {}, "Location"), h("dd", {testid: "store-location", class: "mono"}, store.location),
    h("dt", {}, "Health"), h("dd", {}, health,
      store.last_error ? h("span", {class: "error-text", testid: "store-error"}, ` ${store.last_error}`) : null),
    h("dt", {}, "Unpersisted"), h("dd", {testid: "store-unpersisted", "data-value": store.unpersisted_bytes},
      fmtBytes(store.unpersisted_bytes)));
}

// Each broker's load comes from that broker's own status, which the broker this page came from
// fetches (GET /api/v1/brokers/<id>/status, bounded at 2 s): one that does not answer is shown so.
async function brokerLoads(status, signal) {
  const asked = status.brokers.map((b) => b.node_id === status.node_id ? Promise.resolve(status)
    : api.brokerStatus(b.node_id, signal));
  const settled = await Promise.allSettled(asked);
  if (signal.aborted) throw new DOMException("the view was left", "AbortError");
  return settled.map((result) => result.status === "fulfilled" ? {load: result.value} : {error: result.reason.message});
}

function loadCells({load, error}) {
  if (!load) {
    return [h("td", {colspan: 4, class: "error-text", "data-field": "load-error"}, `not answering: ${error}`)];
  }
  const {share, level} = memoryShare(load.memory);
  const store = load.store;
  return [
    h("td", {"data-field": "memory", "data-used": load.memory.used_bytes, "data-budget": load.memory.budget_bytes},
      h("div", {class: "meter-row"},
        h("div", {class: "meter small"}, h("div", {class: `meter-fill ${level}`, style: `width: ${(share * 100).toFixed(1)}%`})),
        h("span", {class: "nowrap"}, `${fmtBytes(load.memory.used_bytes)} of ${fmtBytes(load.memory.budget_bytes)}`))),
    numCell("connections", load.connections),
    numCell("unpersisted", store.unpersisted_bytes, fmtBytes),
    h("td", {"data-field": "store", "data-healthy": String(store.healthy), title: store.last_error || store.location},
      h("span", {class: store.healthy ? "badge ok" : "badge bad"}, store.healthy ? "healthy" : "unhealthy")),
  ];
}

function brokersTable(status, loads) {
  const most = Math.max(1, ...status.brokers.map((b) => b.partitions));
  const rows = status.brokers.map((b, i) => [
    h("td", {"data-field": "node_id", class: "nowrap"},
      b.node_id === status.node_id ? `${b.node_id} (this broker)` : String(b.node_id)),
    textCell("kafka", `${b.host}:${b.port}`),
    h("td", {"data-field": "http"}, b.http ? h("a", {href: `http://${b.http}/`}, b.http) : "—"),
    numCell("partitions", b.partitions),
    h("td", {class: "bar-cell"}, h("div", {class: "meter small"},
      h("div", {class: "meter-fill low", style: `width: ${((b.partitions / most) * 100).toFixed(1)}%`}))),
    ...loadCells(loads[i]),
  ]);
  return table("brokers-table", [["Node"], ["Kafka address"], ["Console"], ["Partitions", "num"], ["Share"],
    ["Memory"], ["Connections", "num"], ["Unpersisted", "num"], ["Store"]],
  rows, (i) => ({testid: "broker-row", "data-node-id": status.brokers[i].node_id,
    "data-state": loads[i].load ? "answering" : "not-answering"}));
}

function render(body, status, loads) {
  clear(body).append(
    h("div", {class: "stats"},
      stat("Version", "status-version", status.version),
      stat("Uptime", "status-uptime", fmtDuration(status.uptime_s), status.uptime_s),
      stat("Topics", "status-topics", fmtInt(status.topics), status.topics),
      stat("Partitions", "status-partitions", fmtInt(status.partitions), status.partitions),
      stat("Groups", "status-groups", fmtInt(status.groups), status.groups),
      stat("Connections", "status-connections", fmtInt(status.connections), status.connections)),
    h("div", {class: "columns"},
      section("This broker", "this-broker",
        h("dl", {class: "facts"},
          h("dt", {}, "Node id"), h("dd", {testid: "status-node-id"}, String(status.node_id)),
          h("dt", {}, "Cluster id"), h("dd", {class: "mono", testid: "status-cluster-id"}, status.cluster_id),
          h("dt", {}, "Kafka listener"), h("dd", {class: "mono", testid: "status-kafka"}, status.kafka)),
        h("h3", {}, "Memory"), memoryBar(status.memory)),
      section("Store", "store", storeBlock(status.store))),
    section(`Brokers (${status.brokers.length})`, "brokers", brokersTable(status, loads)));
}

export function mount(root, _params, ctx) {
  document.title = "Overview · Martlet";
  const body = h("div", {testid: "overview-body"}, h("p", {class: "muted"}, "Loading…"));
  root.append(h("h1", {}, "Overview"), body);
  return ctx.every(REFRESH_MS, async () => {
    const status = await api.status(ctx.signal);
    render(body, status, await brokerLoads(status, ctx.signal));
  });
}
