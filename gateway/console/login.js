// The login page and the signed-in user in the top bar, for brokers with [http] login.
// The page is the static <main id="login"> of index.html: shown instead of the views (which are
// ended first, so that no refresh goes on behind it) whenever the broker answers 401; a login
// makes a session (an HttpOnly cookie the page never sees, and a CSRF token it sends with every
// change) and brings the route that was asked for back.

import {api, useCsrf, whenUnauthorized} from "./api.js";

const byId = (id) => document.getElementById(id);
let showing = false;
let leaving = null; // ends the current view
let back = null; // shows the route again once logged in

/** Whether the login page is up (the router mounts no view then). */
export function loginShown() {
  return showing;
}

/** The session's user in the top bar, with its logout button (nothing when login is off). */
export function signedIn(session) {
  useCsrf(session && session.csrf);
  const who = byId("who");
  who.hidden = !(session && session.login);
  byId("who-name").textContent = session && session.login ? session.user : "";
}

/** Put the login page up, with a message (why it came back) if any. */
export function showLogin(message, {notice = false} = {}) {
  if (leaving) leaving();
  showing = true;
  signedIn(null);
  for (const id of ["view", "error-banner", "notice-banner"]) byId(id).hidden = true;
  document.querySelector(".topbar nav").hidden = true;
  byId("updated-at").textContent = "";
  const note = byId(notice ? "login-notice" : "login-error");
  byId(notice ? "login-error" : "login-notice").hidden = true;
  note.textContent = message || "";
  note.hidden = !message;
  byId("login").hidden = false;
  byId("login-form").elements.user.focus();
}

function hideLogin() {
  showing = false;
  byId("login").hidden = true;
  byId("view").hidden = false;
  document.querySelector(".topbar nav").hidden = false;
}

async function submit(form) {
  const error = byId("login-error");
  error.hidden = true;
  byId("login-notice").hidden = true;
  const button = byId("login-submit");
  button.disabled = true;
  try {
    const session = await api.login(form.elements.user.value.trim(), form.elements.password.value);
    form.elements.password.value = "";
    hideLogin();
    signedIn(session);
    back();
  } catch (failure) {
    error.textContent = failure.status === 401 ? "Wrong user name or password." : `Not logged in: ${failure.message}`;
    error.hidden = false;
  } finally {
    button.disabled = false;
  }
}

async function logout() {
  try {
    await api.logout();
  } catch {
    // the session may have ended already: the login page follows either way
  }
  showLogin("You are logged out.", {notice: true});
}

/** Wire the page: `end` ends the current view, `route` shows the hash's view again. */
export function setUpLogin(end, route) {
  leaving = end;
  back = route;
  whenUnauthorized(() => {
    if (!showing) showLogin("Please log in (your session has ended, or this broker needs a login).");
  });
  byId("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    submit(event.target);
  });
  byId("logout").addEventListener("click", logout);
}
