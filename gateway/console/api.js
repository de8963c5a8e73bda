// Martlet's HTTP API (/api/v1/...), the same contract the `martlet` commands use.
// Errors come back as JSON {"error": message} with a 4xx/5xx status and become ApiError.
// Every change (POST, DELETE) says Content-Type: application/json, body or not: the broker refuses
// changes without it (415), since a page of another origin cannot send it without a preflight.
// With [http] login the broker answers 401 until the login page has made a session (an HttpOnly
// cookie the browser keeps); every change then also carries the session's CSRF token in
// X-Martlet-CSRF (from /api/login or /api/session), and a 401 anywhere brings the login page back.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let csrf = null;
let onUnauthorized = null;

/** The session's CSRF token, sent with every change (null: none, login is off). */
export function useCsrf(token) {
  csrf = token || null;
}

/** `handler` runs when the broker answers 401 (no login, or the session ended). */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

async function request(method, path, {body, signal, quiet = false} = {}) {
  const init = {method, signal, headers: {Accept: "application/json"}};
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    if (csrf) init.headers["X-Martlet-CSRF"] = csrf;
  }
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.status === 401 && !quiet && onUnauthorized) onUnauthorized(data && data.error);
  if (!response.ok) {
    const message = data && data.error ? data.error : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  return data;
}

const enc = encodeURIComponent;

export const api = {
  session: () => request("GET", "/api/session", {quiet: true}),
  login: (user, password) => request("POST", "/api/login", {body: {user, password}, quiet: true}),
  logout: () => request("POST", "/api/logout", {quiet: true}),
  status: (signal) => request("GET", "/api/v1/status", {signal}),
  brokerStatus: (nodeId, signal) => request("GET", `/api/v1/brokers/${enc(nodeId)}/status`, {signal}),
  topics: (signal) => request("GET", "/api/v1/topics", {signal}),
  topic: (name, signal) => request("GET", `/api/v1/topics/${enc(name)}`, {signal}),
  createTopic: (name, partitions, configs) =>
    request("POST", "/api/v1/topics", {body: {name, partitions, configs}}),
  deleteTopic: (name) => request("DELETE", `/api/v1/topics/${enc(name)}`),
  groups: (signal) => request("GET", "/api/v1/groups", {signal}),
  group: (id, signal) => request("GET", `/api/v1/groups/${enc(id)}`, {signal}),
  messages: (query, signal) => request("GET", `/api/v1/messages?${new URLSearchParams(query)}`, {signal}),
};

export function isAbort(error) {
  return error && error.name === "AbortError";
}
