// The console's two drawings, as plain SVG: the logical range map of a topic and a lag chart.

import {fmtInt, s} from "./dom.js";

export const SLOTS = 65536;  // logical slots 0..65535; each physical partition owns one inclusive range

const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
  "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

export function partitionColour(partition) {
  if (partition < PALETTE.length) return PALETTE[partition];
  return `hsl(${(partition * 137.508) % 360}, 55%, 55%)`;  // golden-angle hues past the palette
}

const MAP = {width: 1000, barTop: 6, barHeight: 44, axisTop: 58, height: 78};

function slotX(slot) {
  return (slot / SLOTS) * MAP.width;
}

function segment(part) {
  const [first, last] = part.slots;
  const x = slotX(first);
  const width = slotX(last + 1) - x;
  const label = `P${part.partition}`;
  const title = `partition ${part.partition}: slots ${first}–${last} (${fmtInt(last - first + 1)} slots)`;
  return s("g", {},
    s("rect", {x, y: MAP.barTop, width, height: MAP.barHeight, fill: partitionColour(part.partition),
      stroke: "#fff", "stroke-width": 1, testid: "range-segment", "data-partition": part.partition,
      "data-first": first, "data-last": last}, s("title", {}, title)),
    width >= 28 ? s("text", {x: x + width / 2, y: MAP.barTop + (width >= 80 ? 19 : 27), class: "seg-label",
      "text-anchor": "middle"}, label) : null,
    width >= 80 ? s("text", {x: x + width / 2, y: MAP.barTop + 36, class: "seg-range", "text-anchor": "middle"},
      `${first}–${last}`) : null);
}

function axis() {
  const ticks = [0, 16384, 32768, 49152, 65535];
  return ticks.map((slot) => {
    const x = slot === 65535 ? MAP.width : slotX(slot);
    const anchor = slot === 0 ? "start" : slot === 65535 ? "end" : "middle";
    return s("g", {}, s("line", {x1: x, x2: x, y1: MAP.axisTop - 6, y2: MAP.axisTop - 2, class: "tick"}),
      s("text", {x, y: MAP.axisTop + 10, "text-anchor": anchor, class: "axis-label"}, String(slot)));
  });
}

/** The bar over slots 0..65535, one coloured segment per physical partition, ticks underneath. */
export function rangeMap(partitions) {
  const sorted = [...partitions].sort((a, b) => a.slots[0] - b.slots[0]);
  return s("svg", {viewBox: `0 0 ${MAP.width} ${MAP.height}`, class: "range-map", testid: "range-map",
    role: "img", "aria-label": "logical slot ranges by partition"},
  s("rect", {x: 0, y: MAP.barTop, width: MAP.width, height: MAP.barHeight, class: "map-empty"}),
  sorted.map(segment), axis());
}

const DOTS_MAX = 60;
const CHART = {width: 1000, height: 240, left: 64, right: 16, top: 14, bottom: 34};

/** Whole-number grid steps of 1, 2 or 5 times a power of ten, about four of them up to `value`. */
function yTicks(value) {
  const raw = Math.max(1, value / 4);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  const count = Math.max(1, Math.ceil(value / step));
  return Array.from({length: count + 1}, (_, i) => i * step);
}

function timeLabel(seconds) {
  return new Date(seconds * 1000).toISOString().slice(11, 19);
}

function chartFrame(ticks, t0, t1, scaleX, scaleY) {
  const parts = [];
  for (const lag of ticks) {
    const y = scaleY(lag);
    parts.push(s("line", {x1: CHART.left, x2: CHART.width - CHART.right, y1: y, y2: y, class: "grid-line"}),
      s("text", {x: CHART.left - 8, y: y + 4, "text-anchor": "end", class: "axis-label"}, fmtInt(lag)));
  }
  const bottom = CHART.height - CHART.bottom;
  for (const [t, anchor] of [[t0, "start"], [(t0 + t1) / 2, "middle"], [t1, "end"]]) {
    parts.push(s("text", {x: scaleX(t), y: bottom + 20, "text-anchor": anchor, class: "axis-label"}, timeLabel(t)));
  }
  return parts;
}

/** A line chart of total lag over time; points are [{time: epoch s, lag}], sorted by time. */
export function lagChart(points) {
  const root = s("svg", {viewBox: `0 0 ${CHART.width} ${CHART.height}`, class: "lag-chart", testid: "lag-chart",
    role: "img", "aria-label": "consumer group lag over time", "data-points": points.length});
  if (points.length === 0) {
    root.append(s("text", {x: CHART.width / 2, y: CHART.height / 2, "text-anchor": "middle", class: "empty"},
      "No lag samples yet"));
    return root;
  }
  const t0 = points[0].time;
  const t1 = Math.max(points[points.length - 1].time, t0 + 1);
  const ticks = yTicks(Math.max(...points.map((p) => p.lag)));
  const maxLag = ticks[ticks.length - 1];
  const scaleX = (t) => CHART.left + ((t - t0) / (t1 - t0)) * (CHART.width - CHART.left - CHART.right);
  const scaleY = (lag) => CHART.top + (1 - lag / maxLag) * (CHART.height - CHART.top - CHART.bottom);
  const coords = points.map((p) => `${scaleX(p.time).toFixed(1)},${scaleY(p.lag).toFixed(1)}`).join(" ");
  const dotted = points.length <= DOTS_MAX ? points : points.slice(-1);  // every sample while they are few
  root.setAttribute("data-last-lag", points[points.length - 1].lag);
  root.append(...chartFrame(ticks, t0, t1, scaleX, scaleY),
    s("polyline", {points: coords, class: "lag-line", testid: "lag-line"}),
    ...dotted.map((p) => s("circle", {cx: scaleX(p.time), cy: scaleY(p.lag), r: 3.5, class: "lag-dot"},
      s("title", {}, `${fmtInt(p.lag)} at ${timeLabel(p.time)} UTC`))));
  return root;
}
