// The reviewers' inbox. Plain script, no build, no dependencies: it talks to hango's API with the token kept in
// sessionStorage (this tab only), or in localStorage when the reviewer ticks "Remember on this device" (then a link
// opened in a new tab is signed in too); the token goes in the Authorization header of this origin's API calls
// only, never in a URL. It follows the tenant approvals stream for what arrives and what goes, and decides
// through POST /v1/runs/{id}/approvals. Everything it shows comes through the API, scoped by the token.
//
// A reviewer decides on what a card shows, so a card shows what will run: the API's JSON is read by a parser that
// keeps every number exactly (parseExact), and what a call would do to a file is worked out by the server for the
// path the tool will really write (GET /v1/approvals/{id}/preview). The page never builds a URL from a string the
// model wrote.
"use strict";

(() => {
  const TOKEN = "hango.inbox.token";
  const MEMBER_REASON = "Members cannot decide approvals: an owner or admin of the tenant decides them.";
  const NO_DESCRIPTION = "Its rule gives no reason: every call the rule matches waits for a reviewer.";
  const MANAGERS = ["owner", "admin"];
  const PREVIEWED = ["write_file", "edit_file"];
  const RECENTLY_DECIDED = 20; // rows of the "Recently decided" list
  // The most recently requested decided approvals read to fill it (one page); the newest decisions among them show.
  const DECIDED_READ = 100;
  // What a decision did, said without promising an undo (there is none): the run goes on with it.
  const CONFIRMED = {
    approve: ["Approved", "the run resumes"],
    edit: ["Edit sent", "the run resumes with your arguments"],
    reject: ["Rejected", "the run resumes and the model is told the call was refused"],
    respond: ["Answer sent", "the run resumes with your answer to the model"],
  };
  const LATER = "the run resumes once its other waiting calls are decided";
  const UNTRUSTED_HINTS = "hints from an untrusted server";
  const VOTED_REASON = "You have voted on this call: the other reviewers decide the rest.";
  const NOTHING_KEPT =
    "No diff was kept when this call was decided, and the file may have changed since: read the arguments.";
  const REMEMBER_FOR = [
    ["1h", "1 hour"],
    ["8h", "8 hours"],
    ["24h", "1 day"],
    ["7d", "7 days"],
  ];

  const page = {
    me: null, // GET /v1/me: the token's user, tenant and role
    manager: false,
    users: new Map(), // user id -> email (owners and admins may list users)
    runs: new Map(), // run id -> Promise of the run
    agents: new Map(), // agent id -> Promise of the agent
    pending: new Map(), // approval id -> approval item
    ended: new Set(), // approval ids seen decided, expired or cancelled: never pending again
    staged: new Map(), // run id -> Map(tool call id -> decision)
    drawing: null, // the timer of the next drawing of new cards
    grants: null, // the standing approvals panel's parts (owners and admins)
    decided: null, // the "Recently decided" list's parts
    ticking: null, // the timer that refreshes the cards' ages and deadlines
    abort: null,
    only: null, // the approval id of an approval's own page; null on the queue
  };

  class Problem extends Error {
    constructor(status, body) {
      super((body && (body.detail || body.title)) || `the server answered ${status}`);
      this.status = status;
      this.body = body || {};
    }
  }

  // --- exact JSON ------------------------------------------------------------------------------------------
  // JSON.parse reads every number as a double: 9007199254740993 comes back as 9007199254740992, and a card would
  // show, an edit would send, a number the tool never received. The page reads the API's JSON with parseExact
  // instead: a number a double cannot hold exactly keeps its digits (an ExactNumber), and showJson writes every
  // value back as the text gave it, keys in the text's order.

  class ExactNumber {
    constructor(text) {
      this.text = text;
    }

    valueOf() {
      return Number(this.text);
    }

    toString() {
      return this.text;
    }
  }

  const KEYS = Symbol("the keys of an object in the order of its text");
  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const INTEGER = /^-?[0-9]+$/;
  const MAX_DEPTH = 512;

  function parseExact(text) {
    let at = 0;
    const fail = (what) => {
      throw new SyntaxError(`${what} at position ${at}`);
    };
    const space = () => {
      while (at < text.length && " \t\n\r".includes(text[at])) at++;
    };
    const expect = (char) => {
      space();
      if (text[at] !== char) fail(at < text.length ? `Expected '${char}'` : "Unexpected end of JSON");
      at++;
    };
    function value(depth) {
      space();
      if (depth > MAX_DEPTH) fail("JSON nested too deeply");
      const char = text[at];
      if (char === "{") return object(depth);
      if (char === "[") return array(depth);
      if (char === '"') return string();
      if (char === "-" || (char >= "0" && char <= "9")) return number();
      for (const [word, literal] of [["true", true], ["false", false], ["null", null]]) {
        if (text.startsWith(word, at)) {
          at += word.length;
          return literal;
        }
      }
      return fail(char === undefined ? "Unexpected end of JSON" : `Unexpected ${JSON.stringify(char)}`);
    }
    function number() {
      NUMBER.lastIndex = at;
      const match = NUMBER.exec(text);
      if (!match) fail("Malformed number");
      at = NUMBER.lastIndex;
      const digits = match[0];
      const double = Number(digits);
      // A whole number a double holds exactly reads as an ordinary number; any other keeps its digits.
      return INTEGER.test(digits) && Number.isSafeInteger(double) ? double : new ExactNumber(digits);
    }
    function string() {
      const start = at++;
      for (;;) {
        const code = text.charCodeAt(at);
        if (Number.isNaN(code)) fail("Unterminated string");
        if (code === 0x22) break;
        at += code === 0x5c ? 2 : 1;
      }
      at++;
      // The browser's own parser reads the escapes and refuses control characters.
      return JSON.parse(text.slice(start, at));
    }
    function array(depth) {
      const items = [];
      at++;
      space();
      if (text[at] === "]") {
        at++;
        return items;
      }
      for (;;) {
        items.push(value(depth + 1));
        space();
        if (text[at] === "]") {
          at++;
          return items;
        }
        expect(",");
      }
    }
    function object(depth) {
      const found = {};
      const keys = [];
      Object.defineProperty(found, KEYS, { value: keys });
      at++;
      space();
      if (text[at] === "}") {
        at++;
        return found;
      }
      for (;;) {
        space();
        if (text[at] !== '"') fail("Expected a property name");
        const key = string();
        expect(":");
        const item = value(depth + 1);
        // As Python reads it: the last value of a repeated key, at the place of its first. defineProperty makes
        // "__proto__" a key like any other.
        if (!Object.prototype.hasOwnProperty.call(found, key)) keys.push(key);
        Object.defineProperty(found, key, { value: item, writable: true, enumerable: true, configurable: true });
        space();
        if (text[at] === "}") {
          at++;
          return found;
        }
        expect(",");
      }
    }
    const result = value(0);
    space();
    if (at < text.length) fail("Unexpected text after the JSON");
    return result;
  }

  function keysOf(object) {
    const own = Object.keys(object);
    const order = object[KEYS];
    if (!order) return own;
    const present = new Set(own);
    const ordered = order.filter((key) => present.has(key));
    const seen = new Set(ordered);
    return [...ordered, ...own.filter((key) => !seen.has(key))];
  }

  // JSON text of a value, exact numbers written as their digits; compact, or indented by ``indent`` spaces.
  function showJson(value, indent = 0, margin = "") {
    if (value instanceof ExactNumber) return value.text;
    if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
    const inner = margin + " ".repeat(indent);
    const show = (item) => showJson(item, indent, inner);
    let open = "[";
    let close = "]";
    let entries;
    if (Array.isArray(value)) {
      entries = value.map(show);
    } else {
      [open, close] = ["{", "}"];
      const keys = keysOf(value).filter((key) => value[key] !== undefined && typeof value[key] !== "function");
      entries = keys.map((key) => `${JSON.stringify(key)}:${indent ? " " : ""}${show(value[key])}`);
    }
    if (!entries.length) return open + close;
    if (!indent) return open + entries.join(",") + close;
    return `${open}\n${inner}${entries.join(`,\n${inner}`)}\n${margin}${close}`;
  }

  const $ = (id) => document.getElementById(id);

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === false || value === null || value === undefined) continue;
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value === true ? "" : value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }

  // The tab's token first: a tab signed in with another token keeps it.
  const token = () => sessionStorage.getItem(TOKEN) || localStorage.getItem(TOKEN);
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Nothing is sent without a token: work still in flight when the reviewer signs out (a promise chain, a stream
  // about to reconnect) stops here instead of calling the API with "Bearer null".
  const SIGNED_OUT = { detail: "signed out" };

  async function call(method, path, body) {
    const bearer = token();
    if (!bearer) throw new Problem(401, SIGNED_OUT);
    const init = { method, headers: { Authorization: `Bearer ${bearer}` } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = showJson(body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let data = null;
    try {
      data = text ? parseExact(text) : null;
    } catch {
      data = { detail: text.slice(0, 300) };
    }
    if (response.status === 401) signOut("The token was refused or has been revoked.");
    if (!response.ok) throw new Problem(response.status, data);
    return data;
  }

  async function everyPage(path, most = 2000) {
    const items = [];
    let cursor = null;
    do {
      const joiner = path.includes("?") ? "&" : "?";
      const found = await call("GET", cursor ? `${path}${joiner}cursor=${encodeURIComponent(cursor)}` : path);
      items.push(...found.items);
      cursor = found.next_cursor;
    } while (cursor && items.length < most);
    return items;
  }

  // Server-Sent Events over fetch (EventSource cannot send a bearer token), resumed with Last-Event-ID.
  // ``onEvent`` returns true when the stream has said its last word.
  // A refusal for now (429, 503 while the database or Redis is down) says when to try again in Retry-After.
  async function follow(path, onEvent, signal) {
    let last = null;
    while (!signal.aborted) {
      let wait = 2000;
      try {
        const bearer = token();
        if (!bearer) return;
        const headers = { Authorization: `Bearer ${bearer}`, Accept: "text/event-stream" };
        if (last) headers["Last-Event-ID"] = last;
        const response = await fetch(path, { headers, signal });
        if (response.status === 401) return signOut("The token was refused or has been revoked.");
        const retryAfter = Number.parseInt(response.headers.get("Retry-After") || "", 10);
        if (!response.ok && retryAfter > 0) wait = Math.min(retryAfter, 60) * 1000;
        if (!response.ok) throw new Problem(response.status, null);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event = parseEvent(block);
            if (event.id) last = event.id;
            if (event.type && event.data !== null && onEvent(event.type, event.data)) return;
          }
        }
      } catch (error) {
        if (signal.aborted) return;
      }
      await sleep(wait);
    }
  }

  function parseEvent(block) {
    const event = { id: null, type: null, data: null };
    const data = [];
    for (const line of block.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (name === "data") data.push(value);
      else if (name === "id") event.id = value;
      else if (name === "event") event.type = value;
    }
    if (data.length) event.data = parseExact(data.join("\n"));
    return event;
  }

  // --- sign-in ---------------------------------------------------------------------------------------------

  function signOut(message = "") {
    sessionStorage.removeItem(TOKEN);
    localStorage.removeItem(TOKEN);
    if (page.abort) page.abort.abort();
    page.pending.clear();
    page.ended.clear();
    page.staged.clear();
    page.grants = null;
    page.decided = null;
    $("view").hidden = true;
    $("view").replaceChildren();
    $("confirmation").replaceChildren();
    $("who").hidden = true;
    $("places").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = false;
    $("sign-in-error").textContent = message;
    $("token").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    // One place at a time: the device's storage only when asked for, the tab's otherwise.
    sessionStorage.removeItem(TOKEN);
    localStorage.removeItem(TOKEN);
    ($("remember-device").checked ? localStorage : sessionStorage).setItem(TOKEN, value);
    $("token").value = "";
    await start();
  }

  async function start() {
    try {
      page.me = await call("GET", "/v1/me");
    } catch (error) {
      if (error.status !== 401) signOut(error.message);
      return;
    }
    // The role says what the page offers; the server still checks every decision.
    page.manager = MANAGERS.includes(page.me.role);
    if (page.manager) {
      for (const user of await everyPage("/v1/users?limit=200")) page.users.set(user.id, user.email);
    }
    $("sign-in").hidden = true;
    $("sign-in-error").textContent = "";
    $("who").hidden = false;
    $("who").replaceChildren(
      "Signed in as ",
      element("strong", { "data-field": "email", text: page.me.email }),
      " (",
      element("span", { class: "role", "aria-label": "Role", text: page.me.role }),
      page.manager ? ")" : ", read-only)",
    );
    $("places").hidden = false;
    $("sign-out").hidden = false;
    $("view").hidden = false;
    page.abort = new AbortController();
    const path = location.pathname.replace(/\/+$/, "");
    // Ids as the API writes them (lower case), however the address spelled them.
    const approval = path.match(/^\/inbox\/approvals\/([0-9a-f-]{36})$/i);
    const run = path.match(/^\/inbox\/runs\/([0-9a-f-]{36})$/i);
    const thread = path.match(/^\/inbox\/threads\/([0-9a-f-]{36})$/i);
    if (run) return showRun(run[1].toLowerCase());
    if (thread) return showThread(thread[1].toLowerCase());
    if (path === "/inbox/runs") return showRuns();
    return showQueue(approval ? approval[1].toLowerCase() : null);
  }

  // --- the queue -------------------------------------------------------------------------------------------

  async function showQueue(only) {
    page.only = only;
    const view = $("view");
    const list = element("section", { "aria-label": only ? "Approval" : "Pending approvals" });
    view.replaceChildren(element("h2", { text: only ? "Approval" : "Pending approvals" }), list);
    const empty = element("p", { class: "empty", text: "Nothing waits for a decision." });
    list.append(empty);
    const wanted = (item) => !only || item.id === only;
    if (only) {
      const found = await oneApproval(only);
      if (!found) list.append(element("p", { text: "No such approval is visible to you." }));
      else if (found.state === "pending") upsert(list, found);
      else list.append(render(found));
    } else {
      for (const item of await everyPage("/v1/approvals?state=pending&limit=200")) upsert(list, item);
    }
    refreshEmpty(list, empty, only);
    if (!only) view.append(decidedPanel());
    if (page.manager && !only) view.append(grantsPanel());
    clearInterval(page.ticking);
    page.ticking = setInterval(() => refreshTimes(list), 10_000);
    follow(
      "/v1/approvals/events",
      (type, item) => {
        if (type === "approval.decided" && !only) noteDecided(item);
        if (!wanted(item)) return false;
        if (type === "approval.escalated") settle(item);
        if (item.state === "pending") upsert(list, item);
        else remove(list, item);
        refreshEmpty(list, empty, only);
        return false;
      },
      page.abort.signal,
    );
  }

  async function oneApproval(id) {
    try {
      return await call("GET", `/v1/approvals/${encodeURIComponent(id)}`);
    } catch (error) {
      if (error.status === 404) return null;
      throw error;
    }
  }

  function refreshEmpty(list, empty, only) {
    empty.hidden = only ? true : page.pending.size > 0;
  }

  // The stream replays the tenant's retained log before it goes live, so most requests it brings are decided a
  // few events later: a card is drawn only once its approval is still pending after the burst that brought it.
  function upsert(list, item) {
    // A replayed or late approval.requested must not bring back a card this page already saw end.
    if (page.pending.has(item.id) || page.ended.has(item.id)) return;
    page.pending.set(item.id, item);
    if (!page.drawing) page.drawing = setTimeout(() => draw(list), 150);
  }

  function draw(list) {
    page.drawing = null;
    for (const item of page.pending.values()) {
      if (!list.querySelector(`article[data-approval="${item.id}"]`)) list.append(render(item));
    }
    refreshEmpty(list, list.querySelector(".empty"), list.getAttribute("aria-label") === "Approval");
  }

  function remove(list, item) {
    page.pending.delete(item.id);
    page.ended.add(item.id);
    const node = list.querySelector(`article[data-approval="${item.id}"]`);
    if (!node) return;
    if (list.getAttribute("aria-label") === "Approval") {
      node.replaceWith(render(item));
    } else {
      node.remove();
    }
    const staged = page.staged.get(item.run_id);
    if (staged) staged.delete(item.tool_call_id);
  }

  function render(item) {
    const id = item.id;
    const article = element("article", { "data-approval": id, "aria-labelledby": `title-${id}` });
    const created = new Date(item.created_at);
    const expires = new Date(item.expires_at);
    const facts = element(
      "dl",
      {},
      element("dt", { text: "Tool" }),
      element("dd", { text: item.tool_name }),
      ...(item.mcp ? mcpFacts(item) : []),
      element("dt", { text: "Run" }),
      element("dd", {}, element("a", { href: `/inbox/runs/${item.run_id}`, text: item.run_id })),
      ...threadFacts(item.thread_id),
      element("dt", { text: "Agent" }),
      element("dd", { "data-field": "agent", text: "…" }),
      element("dt", { text: "Started by" }),
      element("dd", { "data-field": "creator", text: "…" }),
      ...(item.state === "pending"
        ? [
            element("dt", { text: "Waiting" }),
            element("dd", { "data-field": "age", "data-since": created.toISOString(), text: ago(created) }),
            element("dt", { text: "Expires" }),
            element("dd", { "data-field": "expiry", "data-at": expires.toISOString(), text: until(expires) }),
          ]
        : closedFacts(item)),
      ...policyFacts(item),
    );
    article.append(
      element("h3", { id: `title-${id}` }, element("a", { href: `/inbox/approvals/${id}`, text: item.tool_name })),
      element(
        "p",
        { class: "why", "data-field": "description" },
        element("strong", { text: "Why it waits: " }),
        item.description || NO_DESCRIPTION,
      ),
      facts,
      element("h4", { text: "Arguments" }),
      element("pre", { "aria-label": "Arguments as JSON", text: showJson(item.arguments, 2) }),
      ...textArguments(item.arguments),
    );
    const preview = element("div", { class: "preview" });
    const history = element("details", {}, element("summary", { text: "The run's last messages" }));
    article.append(preview, history);
    if (item.state === "pending") {
      const box = actions(item);
      article.append(box);
      if (PREVIEWED.includes(item.tool_name)) holdUntil(box, showPreview(item, preview));
    } else {
      article.append(element("p", { text: decidedText(item) }));
      if (item.decision === "edit" && item.decision_args) {
        article.append(
          element("h4", { text: "Arguments as edited" }),
          element("pre", { "aria-label": "Arguments as edited", text: showJson(item.decision_args, 2) }),
          ...textArguments(item.decision_args, "as edited"),
        );
      }
      // What the reviewer saw when deciding: the preview kept then (the call has written its file since).
      const ran = item.decision === "approve" || item.decision === "edit";
      if (ran && !item.grant_id && PREVIEWED.includes(item.tool_name)) showPreview(item, preview);
    }
    describeRun(item, article, history);
    return article;
  }

  // An MCP call: the server and whether it is trusted, the tool as the server describes it, and its annotations as
  // labels, a destructive tool's as a warning. All of it is the server's own text, shown as text: an untrusted server
  // may write anything, and its annotations are only what it claims. The approval's own page adds the definition's
  // digest: the call is sent only while the server still lists exactly that definition.
  function mcpFacts(item) {
    const mcp = item.mcp;
    const trust = mcp.trusted ? "trusted" : "untrusted";
    const facts = [
      element("dt", { text: "MCP server" }),
      element(
        "dd",
        { "data-field": "mcp-server" },
        element("code", { text: mcp.server }),
        " (",
        element("span", { class: `trust ${trust}`, "data-field": "mcp-trust", text: trust }),
        ")",
      ),
      element("dt", { text: "MCP tool" }),
      element(
        "dd",
        { "data-field": "mcp-tool" },
        mcp.title ? element("strong", { "data-field": "mcp-title", text: mcp.title }) : null,
        mcp.title ? " " : null,
        element("code", { text: mcp.tool }),
      ),
      element("dt", { text: "Description" }),
      element("dd", { class: "mcp-description", "data-field": "mcp-description", text: mcp.description || "—" }),
      element("dt", { text: "Annotations" }),
      annotationLabels(mcp),
    ];
    if (page.only === item.id && item.definition_sha256) {
      facts.push(
        element("dt", { text: "Definition" }),
        element(
          "dd",
          { "data-field": "definition" },
          element("code", { title: item.definition_sha256, text: `sha256:${item.definition_sha256.slice(0, 12)}…` }),
        ),
      );
    }
    return facts;
  }

  // The annotations the tool sets to true, in a reviewer's words; an untrusted server's marked as claims only.
  const ANNOTATION_WORDS = [
    ["readOnlyHint", "read-only"],
    ["destructiveHint", "destructive"],
    ["idempotentHint", "idempotent"],
    ["openWorldHint", "open-world"],
  ];

  function annotationLabels(mcp) {
    const annotations = mcp.annotations || {};
    const words = ANNOTATION_WORDS.filter(([key]) => annotations[key] === true).map(([, word]) => word);
    const holder = element("dd", { "data-field": "mcp-annotations" });
    if (!words.length) holder.append(element("span", { class: "reason", text: "none" }));
    for (const word of words) {
      const kind = word === "destructive" ? "label warning" : "label";
      holder.append(element("span", { class: kind, "data-label": word, text: word }), " ");
    }
    if (!mcp.trusted) holder.append(element("span", { class: "reason", "data-field": "hints", text: UNTRUSTED_HINTS }));
    return holder;
  }

  // A closed approval says when and how it closed, not how long it waited or when it would expire.
  function closedFacts(item) {
    if (item.state === "decided" && item.decided_at) {
      const at = new Date(item.decided_at);
      return [
        element("dt", { text: "Decided" }),
        element("dd", { "data-field": "decided-at", "data-since": at.toISOString(), text: `${ago(at)} ago (${at.toLocaleString()})` }),
      ];
    }
    return [element("dt", { text: "State" }), element("dd", { "data-field": "state", text: item.state })];
  }

  // A string argument that spans lines (a file's content, say) shown as the text it is, below the exact JSON.
  function textArguments(args, suffix = "") {
    if (!args || typeof args !== "object" || Array.isArray(args)) return [];
    const shown = [];
    for (const key of keysOf(args)) {
      const value = args[key];
      if (typeof value !== "string" || !value.includes("\n")) continue;
      const name = `${key}${suffix ? ` ${suffix}` : ""} as text`;
      shown.push(
        element(
          "figure",
          { class: "text-argument" },
          element("figcaption", {}, element("code", { text: key }), ` ${suffix ? `${suffix}, ` : ""}as text`),
          element("pre", { "aria-label": name, text: value }),
        ),
      );
    }
    return shown;
  }

  const myVote = (item) => (item.votes || []).find((vote) => page.me && vote.user_id === page.me.user_id);
  const approvalsOf = (item) => (item.votes || []).filter((vote) => vote.vote === "approve").length;
  const who = (id) => page.users.get(id) || (page.me && id === page.me.user_id ? page.me.email : id);

  // Who may decide (the rule's reviewers) and, under a quorum, how many approvals the call has of how many.
  function policyFacts(item) {
    const facts = [];
    if (item.reviewers) {
      const users = (item.reviewers.users || []).map((id) => page.users.get(id) || id);
      const roles = (item.reviewers.roles || []).map((role) => `${role}s`);
      const text = [...roles, ...users].join(", ");
      facts.push(element("dt", { text: "Reviewers" }), element("dd", { "data-field": "reviewers", text }));
    }
    if (item.escalated_at) {
      const text = `escalated ${ago(new Date(item.escalated_at))} ago; its next deadline fails the run`;
      facts.push(element("dt", { text: "Escalation" }), element("dd", { "data-field": "escalated", text }));
    } else if (item.on_expiry && item.on_expiry !== "fail") {
      const text = expiryText(item.on_expiry);
      facts.push(element("dt", { text: "On expiry" }), element("dd", { "data-field": "on-expiry", text }));
    }
    if (item.approvals_required > 1) {
      const tally = `${approvalsOf(item)} of ${item.approvals_required}`;
      const mine = myVote(item);
      const text = mine ? `You ${mine.vote === "approve" ? "approved" : "rejected"} — ${tally}` : tally;
      facts.push(element("dt", { text: "Approvals" }), element("dd", { "data-field": "votes", text }));
    }
    return facts;
  }

  // What the deadline does, for a reviewer: the run fails, the call is refused, or other reviewers take over.
  function expiryText(onExpiry) {
    if (onExpiry === "reject") return "the call is rejected and the run goes on";
    const to = onExpiry.escalate || {};
    const users = (to.users || []).map((id) => page.users.get(id) || id);
    const names = [...(to.roles || []).map((role) => `${role}s`), ...users];
    return `escalated to ${names.join(", ")} for ${onExpiry.ttl}`;
  }

  function decidedText(item) {
    if (item.state !== "decided") return `This approval is ${item.state}.`;
    const by = who(item.decided_by);
    if (item.grant_id) return `Approved by a standing approval (${item.grant_id}) that ${by} created.`;
    return `Decided: ${item.decision} by ${by}${item.decision_message ? ` (“${item.decision_message}”)` : ""}.`;
  }

  async function describeRun(item, article, history) {
    try {
      const run = await cached(page.runs, item.run_id, () => call("GET", `/v1/runs/${item.run_id}`));
      const agent = await cached(page.agents, run.agent_id, () => call("GET", `/v1/agents/${run.agent_id}`));
      article.querySelector('[data-field="agent"]').textContent = agent.name;
      article.querySelector('[data-field="creator"]').textContent = page.manager
        ? page.users.get(run.created_by) || run.created_by
        : "you";
      const messages = await everyPage(`/v1/runs/${item.run_id}/messages?limit=200`);
      history.append(messageList(messages.slice(-6)));
    } catch (error) {
      article.append(element("p", { class: "problem", text: `Could not read the run: ${error.message}` }));
    }
  }

  function cached(map, key, load) {
    if (!map.has(key)) map.set(key, load());
    return map.get(key);
  }

  function messageList(messages, label = null) {
    const list = element("ol", { class: "messages", "aria-label": label });
    for (const message of messages) {
      const text = message.content
        .map((block) => {
          if (block.type === "text") return block.text;
          if (block.type === "tool_use") return `→ ${block.name}(${showJson(block.input)})`;
          if (block.type === "tool_result") return `← ${block.content}`;
          return `[${block.type}]`;
        })
        .join("\n");
      list.append(element("li", {}, element("strong", { text: `${message.role}: ` }), text));
    }
    return list;
  }

  // --- the preview ------------------------------------------------------------------------------------------
  // The server works out what the call would make of its file with the tool's own code: the path the tool will
  // write (however the model spelled it), whose file it is, and the diff, or the error the tool would answer.

  async function showPreview(item, holder) {
    let preview;
    try {
      preview = await call("GET", `/v1/approvals/${encodeURIComponent(item.id)}/preview`);
    } catch (error) {
      holder.append(element("p", { class: "problem", text: `Could not preview the change: ${error.message}` }));
      return;
    }
    if (preview.kind !== "file") return;
    const decided = item.state !== "pending";
    if (decided && preview.as_of !== "decision") {
      holder.append(element("p", { class: "reason", "data-field": "no-kept-preview", text: NOTHING_KEPT }));
      return;
    }
    const verb = item.tool_name === "edit_file" ? "Edits" : "Writes";
    if (preview.path === null) {
      holder.append(element("p", { class: "problem", text: `The tool would refuse this call: ${preview.error}` }));
      return;
    }
    holder.append(element("h4", { text: `Change to ${preview.path}${decided ? ", as it was when decided" : ""}` }));
    if (preview.path_differs) {
      const notice = `${verb} ${preview.path} — the call wrote the path as ${preview.file_path}`;
      holder.append(element("p", { class: "notice", "data-field": "path-differs", text: notice }));
    }
    holder.append(element("p", { class: "reason", "data-field": "storage", text: storageText(preview) }));
    if (preview.error !== null) {
      holder.append(element("p", { class: "problem", text: `The tool would refuse this call: ${preview.error}` }));
    } else if (preview.too_large) {
      holder.append(element("p", { class: "reason", text: `No diff: ${preview.note}.` }));
    } else {
      holder.append(diffOf(preview.diff));
    }
  }

  function storageText(preview) {
    const owner =
      preview.storage === "agent"
        ? "This file belongs to the agent: /memories/ and /skills/ persist across its runs."
        : "This file belongs to the run: scratch space that lasts for this run only.";
    if (preview.as_of === "decision") return preview.exists ? owner : `${owner} It did not exist: the call created it.`;
    return preview.exists ? owner : `${owner} It does not exist yet: the call creates it.`;
  }

  // The server's unified diff, one line a row: the marker (+ added, − removed) in a column of its own, apart from
  // the line's text, so a removed Markdown bullet reads "− | - tea", never "- - tea". Within each change the removed
  // lines come before the added ones, as in every unified diff.
  const SPOKEN = { add: "added: ", del: "removed: ", same: "", hunk: "" };
  const MARKS = { add: "+", del: "−", same: "", hunk: "" };

  function diffOf(diff) {
    const lines = diffLines(diff);
    if (!lines.length) {
      return element("p", { class: "diff-none", "aria-label": "Diff", text: "No change: the call leaves the file as it is." });
    }
    const pre = element("pre", { class: "diff", "aria-label": "Diff" });
    for (const [kind, text] of lines) {
      pre.append(
        element(
          "span",
          { class: `line ${kind}`, "data-kind": kind },
          element("span", { class: "mark", "aria-hidden": "true", text: MARKS[kind] || "" }),
          SPOKEN[kind] ? element("span", { class: "sr-only", text: SPOKEN[kind] }) : null,
          element("span", { class: "text", text }),
        ),
      );
    }
    return pre;
  }

  // [kind, text] for each row the diff shows. The file header ("--- a/…", "+++ b/…") is read only before the first
  // hunk: inside one, "--- x" is the removed line "-- x". A "\ No newline" note stays with the line it follows.
  function diffLines(diff) {
    const lines = [];
    let removed = [];
    let added = [];
    let last = lines;
    let inHunk = false;
    const flush = () => {
      lines.push(...removed, ...added);
      removed = [];
      added = [];
    };
    for (const row of diff.split("\n")) {
      if (row.startsWith("@@")) {
        flush();
        inHunk = true;
        lines.push(["hunk", row]);
        last = lines;
      } else if (!inHunk || row === "") {
        continue;
      } else if (row.startsWith("-")) {
        removed.push(["del", row.slice(1)]);
        last = removed;
      } else if (row.startsWith("+")) {
        added.push(["add", row.slice(1)]);
        last = added;
      } else if (row.startsWith("\\")) {
        last.push(["note", row]);
      } else {
        flush();
        lines.push(["same", row.slice(1)]);
        last = lines;
      }
    }
    flush();
    return lines;
  }

  // --- decisions -------------------------------------------------------------------------------------------

  function actions(item) {
    const box = element("div", { class: "actions" });
    const reasonId = `reason-${item.id}`;
    const form = element("div", { class: "form" });
    const problem = element("div", { class: "problem", role: "alert" });
    const labels = { approve: "Approve", edit: "Edit", reject: "Reject", respond: "Respond" };
    // A quorum's reviewer votes once: after their vote nothing is left for them to do here (a second is a 409).
    const why = !page.manager ? MEMBER_REASON : myVote(item) ? VOTED_REASON : null;
    for (const decision of ["approve", "edit", "reject", "respond"]) {
      if (!item.allowed_decisions.includes(decision)) continue;
      const button = element("button", {
        type: "button",
        disabled: why !== null,
        "aria-describedby": why === null ? null : reasonId,
        text: labels[decision],
      });
      button.addEventListener("click", () => open(item, decision, form, problem));
      box.append(button);
    }
    if (why !== null) box.append(element("p", { class: "reason", id: reasonId, text: why }));
    if (page.manager && item.allowed_decisions.includes("approve") && !(item.approvals_required > 1)) {
      box.append(rememberControls(item));
    }
    box.append(form, problem);
    return box;
  }

  // A call whose change is previewed is decided once its reviewer can see the change: its buttons wait for the
  // preview, whatever it answers. No decision leaves a card still filling in, and no click is lost as the card grows
  // under the pointer.
  function holdUntil(box, shown) {
    const held = [...box.querySelectorAll(":scope > button:not([disabled])")];
    if (!held.length) return;
    const note = element("p", { class: "reason", "data-field": "loading", text: "Loading the change…" });
    for (const button of held) button.disabled = true;
    held[held.length - 1].after(note);
    shown.finally(() => {
      for (const button of held) button.disabled = false;
      note.remove();
    });
  }

  // "Remember" turns an approve into a standing approval of exactly this call (the same tool, agent and
  // arguments) for a while: the server creates the grant in the same transaction as the decision.
  function rememberControls(item) {
    const id = `remember-${item.id}`;
    const box = element("input", { type: "checkbox", id, "data-field": "remember", "aria-describedby": `${id}-hint` });
    const select = element("select", { id: `${id}-ttl`, "data-field": "remember-ttl" });
    for (const [value, label] of REMEMBER_FOR) select.append(element("option", { value, text: label }));
    return element(
      "div",
      { class: "remember" },
      box,
      element("label", { for: id, class: "inline", text: "Remember this approval" }),
      element("label", { for: `${id}-ttl`, class: "inline", text: "for" }),
      select,
      element("p", {
        class: "reason",
        id: `${id}-hint`,
        text: "The same call with the same arguments then runs without asking, until it expires or is revoked.",
      }),
    );
  }

  function approval(item) {
    const card = document.querySelector(`article[data-approval="${item.id}"]`);
    const box = card && card.querySelector('[data-field="remember"]');
    if (!box || !box.checked) return { decision: "approve" };
    return { decision: "approve", remember: { ttl: card.querySelector('[data-field="remember-ttl"]').value } };
  }

  function open(item, decision, form, problem) {
    problem.replaceChildren();
    if (decision === "approve") return stage(item, approval(item), problem);
    const id = `${decision}-${item.id}`;
    const isEdit = decision === "edit";
    const area = element("textarea", { id });
    area.value = isEdit ? showJson(item.arguments, 2) : "";
    const submit = element("button", { type: "button", text: isEdit ? "Submit edit" : "Send" });
    submit.addEventListener("click", () => {
      problem.replaceChildren();
      if (!isEdit) return stage(item, { decision, message: area.value }, problem);
      let args;
      try {
        // Read exactly: the reviewer's numbers are sent as the reviewer wrote them.
        args = parseExact(area.value);
      } catch (error) {
        return showProblem(problem, { detail: `The arguments are not JSON: ${error.message}` });
      }
      return stage(item, { decision: "edit", args }, problem);
    });
    form.replaceChildren(element("label", { for: id, text: isEdit ? "Arguments" : "Message" }), area, submit);
    area.focus();
  }

  // A run's pending calls are decided together (one POST covers the batch): decisions wait here until every
  // pending call of the run has one.
  async function stage(item, decision, problem) {
    const staged = page.staged.get(item.run_id) || new Map();
    page.staged.set(item.run_id, staged);
    // Bound to the arguments shown: if the call is not what this page displayed, the server refuses (409).
    staged.set(item.tool_call_id, {
      tool_call_id: item.tool_call_id,
      arguments_sha256: item.arguments_sha256,
      ...decision,
    });
    const siblings = [...page.pending.values()].filter((other) => other.run_id === item.run_id);
    const missing = siblings.filter((other) => !staged.has(other.tool_call_id));
    if (missing.length) {
      // Calls reserved for other reviewers are not this reviewer's to name: they may send what they decided.
      const names = missing.map((other) => other.tool_name).join(", ");
      const send = element("button", { type: "button", text: "Send my decisions now" });
      send.addEventListener("click", () => sendStaged(item.run_id, problem));
      problem.append(
        element("p", { text: `Noted. This run waits on ${missing.length} more call(s): ${names}.` }),
        element("p", { class: "reason", text: "If those are for other reviewers, send yours now." }),
        send,
      );
      return;
    }
    await sendStaged(item.run_id, problem);
  }

  // POST what is staged for a run; a call decided leaves the queue, a quorum call that got a vote stays, redrawn
  // with its votes.
  async function sendStaged(runId, problem) {
    const staged = page.staged.get(runId);
    if (!staged || !staged.size) return;
    const decisions = [...staged.values()];
    page.staged.delete(runId);
    problem.replaceChildren();
    try {
      const result = await call("POST", `/v1/runs/${runId}/approvals`, { decisions });
      if (decisions.some((decision) => decision.remember)) refreshGrants();
      confirm(result);
      for (const answered of result.approvals) settle(answered);
    } catch (error) {
      showProblem(problem, error.body || { detail: error.message });
    }
  }

  // Say what each decision did: the card goes (or, for a vote, stays with the new tally), and the reviewer reads why.
  function confirm(result) {
    const resumes = result.run.state === "queued";
    const lines = result.approvals.map((answered) => {
      if (answered.state === "pending") {
        return `Your vote is recorded — ${approvalsOf(answered)} of ${answered.approvals_required} approvals (${answered.tool_name})`;
      }
      const [done, then] = CONFIRMED[answered.decision] || [`Decided: ${answered.decision}`, "the run resumes"];
      return `${done} — ${resumes ? then : LATER} (${answered.tool_name})`;
    });
    $("confirmation").replaceChildren(...lines.map((text) => element("p", { text })));
  }

  function settle(item) {
    const node = document.querySelector(`article[data-approval="${item.id}"]`);
    const inQueue = node && node.closest('section[aria-label="Pending approvals"]');
    if (item.state === "pending") {
      page.pending.set(item.id, item);
      if (node) node.replaceWith(render(item));
      return;
    }
    page.pending.delete(item.id);
    page.ended.add(item.id);
    if (inQueue) node.remove();
    else if (node) node.replaceWith(render(item));
  }

  function showProblem(holder, body) {
    holder.replaceChildren(element("p", { text: body.detail || body.title || "The decision was refused." }));
    const errors = Array.isArray(body.errors) ? body.errors : [];
    if (errors.length) {
      const list = element("ul", { "aria-label": "Field errors" });
      for (const error of errors) {
        list.append(element("li", {}, element("code", { text: error.field || "" }), ` ${error.message || ""}`));
      }
      holder.append(list);
    }
  }

  // --- recently decided -------------------------------------------------------------------------------------
  // The list reads one page of decided approvals, the most recently requested first (?order=newest), and keeps the
  // most recently decided of them; the tenant stream's approval.decided events add to it live.

  function decidedPanel() {
    const body = element("tbody");
    const table = element(
      "table",
      { "aria-label": "Recently decided", hidden: true },
      element(
        "thead",
        {},
        element(
          "tr",
          {},
          ...["Tool", "Run", "Agent", "Decision", "By", "When"].map((name) => element("th", { scope: "col", text: name })),
        ),
      ),
      body,
    );
    const empty = element("p", { class: "empty", text: "Nothing decided yet." });
    const problem = element("div", { class: "problem", role: "alert" });
    page.decided = { table, body, empty, problem, items: new Map() };
    loadDecided();
    return element(
      "section",
      { "aria-labelledby": "decided-title", class: "grants decided" },
      element("h2", { id: "decided-title", text: "Recently decided" }),
      empty,
      table,
      problem,
    );
  }

  async function loadDecided() {
    const panel = page.decided;
    try {
      const found = await call("GET", `/v1/approvals?state=decided&order=newest&limit=${DECIDED_READ}`);
      for (const item of found.items) noteDecided(item);
    } catch (error) {
      if (panel) showProblem(panel.problem, error.body || { detail: error.message });
    }
  }

  function noteDecided(item) {
    const panel = page.decided;
    if (!panel || item.state !== "decided" || !item.decided_at) return;
    panel.items.set(item.id, item);
    const newest = [...panel.items.values()].sort((a, b) => Date.parse(b.decided_at) - Date.parse(a.decided_at));
    for (const old of newest.slice(RECENTLY_DECIDED)) panel.items.delete(old.id);
    panel.body.replaceChildren(...newest.slice(0, RECENTLY_DECIDED).map(decidedRow));
    panel.empty.hidden = panel.items.size > 0;
    panel.table.hidden = panel.items.size === 0;
  }

  function decidedRow(item) {
    const agent = element("td", { "data-field": "agent", text: "…" });
    cached(page.runs, item.run_id, () => call("GET", `/v1/runs/${item.run_id}`))
      .then((run) => cached(page.agents, run.agent_id, () => call("GET", `/v1/agents/${run.agent_id}`)))
      .then((found) => (agent.textContent = found.name))
      .catch(() => (agent.textContent = "—"));
    const at = new Date(item.decided_at);
    const decision = item.grant_id ? "approve (standing approval)" : item.decision;
    return element(
      "tr",
      { "data-approval": item.id },
      element("td", {}, element("a", { href: `/inbox/approvals/${item.id}` }, element("code", { text: item.tool_name }))),
      element("td", {}, element("a", { href: `/inbox/runs/${item.run_id}`, text: item.run_id.slice(0, 8) })),
      agent,
      element("td", { "data-field": "decision", text: decision }),
      element("td", { "data-field": "by", text: who(item.decided_by) }),
      element("td", { "data-field": "decided-at", "data-since": at.toISOString(), title: at.toLocaleString(), text: `${ago(at)} ago` }),
    );
  }

  // --- standing approvals ------------------------------------------------------------------------------------

  function grantsPanel() {
    const body = element("tbody");
    const table = element(
      "table",
      { "aria-label": "Standing approvals", hidden: true },
      element(
        "thead",
        {},
        element(
          "tr",
          {},
          ...["Agent", "Tool", "When", "Run", "Expires", "Created by", ""].map((name) =>
            element("th", { scope: "col", text: name }),
          ),
        ),
      ),
      body,
    );
    const empty = element("p", { class: "empty", text: "No standing approvals." });
    const problem = element("div", { class: "problem", role: "alert" });
    page.grants = { table, body, empty, problem };
    refreshGrants();
    setInterval(refreshGrants, 30_000);
    return element(
      "section",
      { "aria-labelledby": "grants-title", class: "grants" },
      element("h2", { id: "grants-title", text: "Standing approvals" }),
      element("p", {
        class: "reason",
        text: "Calls these cover run without waiting for a decision. Revoking one takes effect at once.",
      }),
      empty,
      table,
      problem,
    );
  }

  async function refreshGrants() {
    const panel = page.grants;
    if (!panel || !token()) return;
    try {
      const grants = await everyPage("/v1/grants?active=true&limit=200");
      panel.body.replaceChildren(...grants.map(grantRow));
      panel.empty.hidden = grants.length > 0;
      panel.table.hidden = grants.length === 0;
    } catch (error) {
      showProblem(panel.problem, error.body || { detail: error.message });
    }
  }

  function grantRow(grant) {
    const agent = element("td", { text: grant.agent_id });
    cached(page.agents, grant.agent_id, () => call("GET", `/v1/agents/${grant.agent_id}`))
      .then((found) => (agent.textContent = found.name))
      .catch(() => {});
    const expires = new Date(grant.expires_at);
    const revoke = element("button", { type: "button", text: "Revoke" });
    const row = element(
      "tr",
      { "data-grant": grant.id },
      agent,
      element("td", {}, element("code", { text: grant.tool_name })),
      element("td", {}, grant.when ? element("code", { text: showJson(grant.when) }) : "every call"),
      element("td", { text: grant.run_id || "any run" }),
      element("td", { "data-field": "expiry", "data-at": expires.toISOString(), text: until(expires) }),
      element("td", { text: page.users.get(grant.created_by) || grant.created_by }),
      element("td", {}, revoke),
    );
    revoke.addEventListener("click", async () => {
      const panel = page.grants;
      panel.problem.replaceChildren();
      try {
        await call("DELETE", `/v1/grants/${grant.id}`);
        row.remove();
        panel.empty.hidden = panel.body.children.length > 0;
        panel.table.hidden = panel.body.children.length === 0;
      } catch (error) {
        showProblem(panel.problem, error.body || { detail: error.message });
      }
    });
    return row;
  }

  // --- times -----------------------------------------------------------------------------------------------

  function span(ms) {
    const seconds = Math.max(0, Math.round(ms / 1000));
    if (seconds < 60) return `${seconds} s`;
    const minutes = Math.round(seconds / 60);
    if (minutes < 120) return `${minutes} min`;
    return `${Math.round(minutes / 60)} h`;
  }

  const ago = (at) => `${span(Date.now() - at.getTime())}`;
  const until = (at) =>
    at.getTime() <= Date.now() ? `expired (${at.toLocaleString()})` : `in ${span(at.getTime() - Date.now())} (${at.toLocaleString()})`;

  function refreshTimes(root) {
    for (const node of root.querySelectorAll('[data-field="age"]')) node.textContent = ago(new Date(node.dataset.since));
    for (const node of document.querySelectorAll('[data-field="decided-at"]')) {
      const at = new Date(node.dataset.since);
      node.textContent = node.tagName === "TD" ? `${ago(at)} ago` : `${ago(at)} ago (${at.toLocaleString()})`;
    }
    for (const node of root.querySelectorAll('[data-field="expiry"]')) node.textContent = until(new Date(node.dataset.at));
  }

  // --- a run -----------------------------------------------------------------------------------------------

  async function showRun(runId) {
    const view = $("view");
    let run;
    try {
      run = await call("GET", `/v1/runs/${runId}`);
    } catch (error) {
      view.replaceChildren(element("p", { class: "problem", text: error.message }));
      return;
    }
    const state = element("dd", { "data-field": "state", text: run.state });
    const events = element("ol", { "aria-label": "Events" });
    const messages = element("section", { "aria-label": "Messages" });
    view.replaceChildren(
      element("h2", { text: `Run ${run.id}` }),
      element("dl", {}, element("dt", { text: "State" }), state, ...threadFacts(run.thread_id)),
      element("h3", { text: "Messages" }),
      messages,
      element("h3", { text: "Events" }),
      events,
    );
    const refreshMessages = async () =>
      messages.replaceChildren(messageList(await everyPage(`/v1/runs/${runId}/messages?limit=200`)));
    await refreshMessages();
    follow(
      `/v1/runs/${runId}/events`,
      (type, data) => {
        events.append(element("li", {}, element("code", { text: type }), ` ${summary(data)}`));
        // The run's state as the API says it (succeeded, failed…), read again when an event may have moved it.
        if (type.startsWith("run.")) {
          call("GET", `/v1/runs/${runId}`)
            .then((now) => (state.textContent = now.state))
            .catch(() => {});
        }
        if (type === "message.created" || type === "run.finished" || type.startsWith("tool.")) refreshMessages();
        return type === "run.finished";
      },
      page.abort.signal,
    );
  }

  // --- a thread's conversation ------------------------------------------------------------------------------
  // A run on a thread continues the thread's conversation: a reviewer reads what came before the call, across the
  // thread's runs. The page lists the conversation and reads it again when the thread's stream says it grew.

  // The link from a run (or an approval of one) on a thread to its conversation; nothing for a run without one.
  function threadFacts(threadId) {
    if (!threadId) return [];
    return [
      element("dt", { text: "Thread" }),
      element("dd", {}, element("a", { href: `/inbox/threads/${threadId}`, "data-field": "thread", text: "Conversation" })),
    ];
  }

  async function showThread(threadId) {
    const view = $("view");
    let thread;
    try {
      thread = await call("GET", `/v1/threads/${threadId}`);
    } catch (error) {
      view.replaceChildren(element("p", { class: "problem", text: error.message }));
      return;
    }
    const status = element("dd", { "data-field": "status", text: thread.status });
    const agent = element("dd", { "data-field": "agent", text: "…" });
    const messages = element("section", { "aria-label": "Conversation" });
    const problem = element("div", { class: "problem", role: "alert" });
    view.replaceChildren(
      element("h2", { text: "Conversation" }),
      element(
        "dl",
        {},
        element("dt", { text: "Thread" }),
        element("dd", {}, element("code", { text: thread.id })),
        element("dt", { text: "Agent" }),
        agent,
        element("dt", { text: "Status" }),
        status,
      ),
      messages,
      problem,
    );
    cached(page.agents, thread.agent_id, () => call("GET", `/v1/agents/${thread.agent_id}`))
      .then((found) => (agent.textContent = found.name))
      .catch(() => (agent.textContent = thread.agent_id));
    const refresh = async () => {
      try {
        const [now, items] = await Promise.all([
          call("GET", `/v1/threads/${threadId}`),
          everyPage(`/v1/threads/${threadId}/messages?limit=200`),
        ]);
        status.textContent = now.status;
        messages.replaceChildren(
          items.length ? messageList(items, "Messages") : element("p", { class: "empty", text: "No messages yet." }),
        );
      } catch (error) {
        showProblem(problem, error.body || { detail: error.message });
      }
    };
    await refresh();
    // The stream replays the thread's events before it goes live: a burst of them is one read of the conversation.
    let pending = null;
    follow(
      `/v1/threads/${threadId}/events`,
      (type) => {
        if (type === "message.created" || type.startsWith("run.") || type.startsWith("approval.")) {
          clearTimeout(pending);
          pending = setTimeout(refresh, 250);
        }
        return false;
      },
      page.abort.signal,
    );
  }

  // --- the runs ----------------------------------------------------------------------------------------------

  async function showRuns() {
    const view = $("view");
    const body = element("tbody");
    const table = element(
      "table",
      { "aria-label": "Runs" },
      element(
        "thead",
        {},
        element(
          "tr",
          {},
          ...["Run", "Agent", "State", "Created", "Started by"].map((name) => element("th", { scope: "col", text: name })),
        ),
      ),
      body,
    );
    const more = element("button", { type: "button", text: "Show older runs", hidden: true });
    const problem = element("div", { class: "problem", role: "alert" });
    view.replaceChildren(element("h2", { text: "Runs" }), element("section", { class: "grants" }, table, more, problem));
    let cursor = null;
    const load = async () => {
      try {
        const path = `/v1/runs?limit=50${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
        const found = await call("GET", path);
        body.append(...found.items.map(runRow));
        cursor = found.next_cursor;
        more.hidden = !cursor;
      } catch (error) {
        showProblem(problem, error.body || { detail: error.message });
      }
    };
    more.addEventListener("click", load);
    await load();
  }

  function runRow(run) {
    const agent = element("td", { text: "…" });
    cached(page.agents, run.agent_id, () => call("GET", `/v1/agents/${run.agent_id}`))
      .then((found) => (agent.textContent = found.name))
      .catch(() => (agent.textContent = run.agent_id));
    return element(
      "tr",
      { "data-run": run.id },
      element("td", {}, element("a", { href: `/inbox/runs/${run.id}` }, element("code", { text: run.id }))),
      agent,
      element("td", { "data-field": "state", text: run.state }),
      element("td", { text: new Date(run.created_at).toLocaleString() }),
      element("td", { text: page.manager ? who(run.created_by) : "you" }),
    );
  }

  function summary(data) {
    const text = showJson(data);
    return text.length > 160 ? `${text.slice(0, 160)}…` : text;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("sign-in").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", () => signOut());
    if (token()) start();
    else signOut();
  });
})();
