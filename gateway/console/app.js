// The Martlet console: a single page over Martlet's HTTP API, routed by the URL's hash.
//   #/                   overview (this broker, the store, all brokers)
//   #/topics             topic list and the create form
//   #/topics/<name>      one topic: range map, partitions, configs, delete
//   #/groups             consumer groups
//   #/groups/<id>        one group: members, offsets, lag chart
//   #/messages?topic=T&partition=P[&offset=O|&timestamp=MS|&key=K][&limit=N]
// Each view mounts into <main> with a ViewContext; leaving the view aborts its fetches and timers.
// With [http] login, /api/session answers 401 until logged in: login.js shows its page instead.

import {api, isAbort} from "./api.js";
import * as groups from "./groups.js";
import {loginShown, setUpLogin, showLogin, signedIn} from "./login.js";
import * as messages from "./messages.js";
import * as overview from "./overview.js";
import * as topics from "./topics.js";
import {clearError, showError, showPendingNotice, ViewContext} from "./ui.js";

const ROUTES = [
  [/^\/?$/, "overview", overview.mount],
  [/^\/topics\/?$/, "topics", topics.mountList],
  [/^\/topics\/(?<name>.+)$/, "topics", topics.mountTopic],
  [/^\/groups\/?$/, "groups", groups.mountList],
  [/^\/groups\/(?<name>.+)$/, "groups", groups.mountGroup],
  [/^\/messages\/?$/, "messages", messages.mount],
];

let current = null;

function parseHash() {
  const hash = location.hash.replace(/^#/, "");
  const at = hash.indexOf("?");
  const path = at < 0 ? hash : hash.slice(0, at);
  const query = Object.fromEntries(new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)));
  return {path, query};
}

function markNav(section) {
  for (const a of document.querySelectorAll("nav a")) {
    if (a.dataset.route === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

function endView() {
  if (current) current.end();
  current = null;
}

async function route() {
  if (loginShown()) return; // the view asked for comes once logged in
  if (current) current.end();
  const ctx = new ViewContext();
  current = ctx;
  clearError();
  showPendingNotice();
  document.getElementById("updated-at").textContent = "";
  const root = document.getElementById("view");
  root.replaceChildren();
  root.removeAttribute("data-ready");
  const {path, query} = parseHash();
  const found = ROUTES.map(([pattern, section, mount]) => [path.match(pattern), section, mount]).find(([m]) => m);
  if (!found) {
    markNav(null);
    root.append(Object.assign(document.createElement("h1"), {textContent: "Not found"}));
    showError(`No page at #${path}`);
    return;
  }
  const [match, section, mount] = found;
  markNav(section);
  const params = {...query};
  if (match.groups && match.groups.name) params.name = decodeURIComponent(match.groups.name);
  try {
    await mount(root, params, ctx);
  } catch (error) {
    if (!isAbort(error) && ctx.alive) showError(error.message);
  }
  // Tests and scripts wait for this: the view's first data is on the page (or its error is shown).
  if (ctx.alive) root.setAttribute("data-ready", "true");
}

async function start() {
  setUpLogin(endView, route);
  window.addEventListener("hashchange", route);
  try {
    signedIn(await api.session());
  } catch (error) {
    if (error.status === 401) {
      showLogin();
      return;
    }
    // an older broker without /api/session (404): no login there
  }
  route();
}

start();
