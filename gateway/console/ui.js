// What every view shares: the error and notice banners, the confirmation dialog, the
// "updated at" clock, and the view context (an AbortSignal and timers that end with the view).

import {isAbort} from "./api.js";
import {fmtClock, h} from "./dom.js";

const errorBanner = () => document.getElementById("error-banner");
const noticeBanner = () => document.getElementById("notice-banner");

export function showError(message) {
  const banner = errorBanner();
  banner.textContent = message;
  banner.hidden = false;
}

export function clearError() {
  errorBanner().hidden = true;
}

/** A notice that survives one navigation (e.g. "topic deleted" shown on the topic list). */
let pendingNotice = null;

export function noticeAfterNavigation(message) {
  pendingNotice = message;
}

export function showPendingNotice() {
  const banner = noticeBanner();
  banner.textContent = pendingNotice || "";
  banner.hidden = !pendingNotice;
  pendingNotice = null;
}

export function markUpdated() {
  document.getElementById("updated-at").textContent = `updated ${fmtClock(new Date())}`;
}

/** Ask in an in-page <dialog>; resolves true for OK, false for Cancel or Escape. */
export function confirmDialog(title, text, okLabel, {danger = false} = {}) {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const ok = document.getElementById("confirm-ok");
  ok.textContent = okLabel;
  ok.classList.toggle("danger", danger);
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), {once: true});
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

/** One view's lifetime: fetches take `signal`; `every` runs a refresh now and then periodically. */
export class ViewContext {
  constructor() {
    this.controller = new AbortController();
    this.timers = [];
  }

  get signal() {
    return this.controller.signal;
  }

  get alive() {
    return !this.controller.signal.aborted;
  }

  /** Runs `refresh` now and every `ms`; a failed refresh shows the error and keeps the last data. */
  every(ms, refresh) {
    const run = async () => {
      try {
        await refresh();
        if (this.alive) {
          clearError();
          markUpdated();
        }
      } catch (error) {
        if (!isAbort(error) && this.alive) showError(error.message);
      }
    };
    this.timers.push(setInterval(run, ms));
    return run();
  }

  end() {
    this.controller.abort();
    this.timers.forEach(clearInterval);
  }
}

export function section(title, testid, ...children) {
  return h("section", {class: "card", testid}, h("h2", {}, title), ...children);
}

export function link(href, text, testid) {
  return h("a", {href, testid}, text);
}

export function topicHref(name) {
  return `#/topics/${encodeURIComponent(name)}`;
}

export function groupHref(id) {
  return `#/groups/${encodeURIComponent(id)}`;
}

export function messagesHref(query) {
  return `#/messages?${new URLSearchParams(query)}`;
}
