// DOM and formatting helpers of the console. Every value from the API reaches the page as text
// (textContent or an attribute), never as HTML, so topic names, keys and values cannot inject markup.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name === "testid") node.setAttribute("data-testid", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  return node;
}

/** An HTML element: h("td", {class: "num"}, "12"). `testid` becomes data-testid. */
export function h(tag, attrs, ...children) {
  return append(setAttrs(document.createElement(tag), attrs), children);
}

/** An SVG element, same signature as h. */
export function s(tag, attrs, ...children) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function fmtInt(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US");
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  let value = Number(n);
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${BYTE_UNITS[unit]}`;
}

export function fmtDuration(seconds) {
  let rest = Math.floor(Number(seconds));
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (rest >= size || parts.length) parts.push(`${Math.floor(rest / size)}${unit}`);
    rest %= size;
  }
  parts.push(`${rest}s`);
  return parts.slice(0, 3).join(" ");
}

/** Epoch milliseconds as an ISO-like UTC time with milliseconds. */
export function fmtTimeMs(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  return new Date(Number(ms)).toISOString().replace("T", " ").replace("Z", " UTC");
}

export function fmtClock(date) {
  return date.toISOString().slice(11, 19) + " UTC";
}

/** A table: columns are [label, className?]; rows are arrays of cells (nodes or text). */
export function table(testid, columns, rows, rowAttrs) {
  const head = h("tr", {}, columns.map(([label, cls]) => h("th", {class: cls}, label)));
  const body = rows.map((cells, i) =>
    h("tr", rowAttrs ? rowAttrs(i) : {}, cells.map((cell, j) => cell instanceof HTMLTableCellElement
      ? cell : h("td", {class: columns[j][1]}, cell))));
  return h("table", {testid, class: "grid"}, h("thead", {}, head), h("tbody", {}, body));
}

/** A numeric cell: the formatted figure shown, the raw one in data-value for scripts and tests. */
export function numCell(field, value, format = fmtInt) {
  return h("td", {class: "num", "data-field": field, "data-value": value ?? ""}, format(value));
}

export function textCell(field, value) {
  return h("td", {"data-field": field}, value ?? "—");
}
