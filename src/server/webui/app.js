// The web chat's behaviour: the conversation list, the settings, sending a message and showing
// its streamed answer (with tokens/s), stopping it, and the server's errors shown in the chat.
// Storage is store.js, the HTTP calls api.js, Markdown render.js; model text reaches the page
// only through render.js or textContent.
import { ApiError, listModels, streamChat } from './api.js';
import { renderMarkdown } from './render.js';
import {
  autoTitle, loadConversations, loadSettings, newConversation, saveConversations, saveSettings,
} from './store.js';

const $ = (id) => document.getElementById(id);
const ui = {
  conversations: $('conversations'),
  newChat: $('new-chat'),
  model: $('model'),
  status: $('server-status'),
  settingsToggle: $('settings-toggle'),
  settings: $('settings'),
  apiKey: $('api-key'),
  messages: $('messages'),
  composer: $('composer'),
  prompt: $('prompt'),
  send: $('send'),
  stop: $('stop'),
};

const state = {
  settings: loadSettings(),
  conversations: loadConversations(),
  current: null,    // the conversation shown
  streaming: null,  // {conversation, message, controller, el} while an answer streams
};

// --- status line -------------------------------------------------------------------------------

function setStatus(text, problem = false) {
  ui.status.textContent = text;
  ui.status.classList.toggle('problem', problem);
}

function persist() {
  const err = saveConversations(state.conversations);
  if (err) setStatus(`Could not save the conversations in this browser: ${err.message}`, true);
}

// --- conversation list -------------------------------------------------------------------------

function sortConversations() {
  state.conversations.sort((a, b) => b.updated - a.updated);
}

function renderList() {
  ui.conversations.replaceChildren();
  for (const c of state.conversations) {
    const li = document.createElement('li');
    li.dataset.id = c.id;
    if (c === state.current) li.classList.add('current');
    const title = document.createElement('button');
    title.type = 'button';
    title.className = 'title';
    title.textContent = c.title;
    title.title = c.title;
    title.addEventListener('click', () => select(c));
    const rename = document.createElement('button');
    rename.type = 'button';
    rename.className = 'icon rename';
    rename.textContent = '✎';
    rename.title = 'Rename';
    rename.addEventListener('click', () => {
      const name = prompt('Rename the conversation', c.title);
      if (name === null || name.trim() === '') return;
      c.title = name.trim();
      c.titleSet = true;
      persist();
      renderList();
    });
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'icon delete';
    del.textContent = '×';
    del.title = 'Delete';
    del.addEventListener('click', () => {
      if (!confirm(`Delete "${c.title}"?`)) return;
      if (state.streaming && state.streaming.conversation === c) stop();
      state.conversations = state.conversations.filter((x) => x !== c);
      if (state.current === c) state.current = state.conversations[0] || null;
      persist();
      renderList();
      renderMessages();
    });
    li.append(title, rename, del);
    ui.conversations.append(li);
  }
}

function select(c) {
  state.current = c;
  renderList();
  renderMessages();
  ui.prompt.focus();
}

// --- messages ----------------------------------------------------------------------------------

function statsText(s) {
  const parts = [];
  if (s.stopped) parts.push('stopped');
  parts.push(`${s.tokens} token${s.tokens === 1 ? '' : 's'}`);
  if (s.tok_s !== null) parts.push(`${s.tok_s.toFixed(1)} tok/s`);
  if (s.ttft_ms !== null) parts.push(`first token ${Math.round(s.ttft_ms)} ms`);
  if (s.model) parts.push(s.model);
  return parts.join(' · ');
}

function messageElement(m) {
  const el = document.createElement('div');
  el.className = `msg ${m.role}`;
  const content = document.createElement('div');
  content.className = 'content';
  el.append(content);
  fillMessage(el, m);
  return el;
}

// A thinking model's reasoning (reasoning_content), as text in a block folded by default; kept
// across redraws so a block the reader opened stays open while the answer streams.
function fillThinking(el, m) {
  let block = el.querySelector('.thinking');
  if (!m.reasoning) {
    block?.remove();
    return;
  }
  if (!block) {
    block = document.createElement('details');
    block.className = 'thinking';
    const summary = document.createElement('summary');
    summary.textContent = 'Thinking';
    const text = document.createElement('div');
    text.className = 'thought';
    block.append(summary, text);
    el.prepend(block);
  }
  block.querySelector('.thought').textContent = m.reasoning;
}

// (Re)draws one message's text, statistics and error into its element.
function fillMessage(el, m) {
  fillThinking(el, m);
  const content = el.querySelector('.content');
  if (m.role === 'user') content.textContent = m.content;
  else content.replaceChildren(renderMarkdown(m.content));
  el.querySelector('.stats')?.remove();
  el.querySelector('.error')?.remove();
  if (m.stats) {
    const stats = document.createElement('div');
    stats.className = 'stats';
    stats.textContent = statsText(m.stats);
    el.append(stats);
  } else if (m.stopped) {
    const stats = document.createElement('div');
    stats.className = 'stats';
    stats.textContent = 'stopped';
    el.append(stats);
  }
  if (m.error) {
    const error = document.createElement('div');
    error.className = 'error';
    error.textContent = m.error;
    el.append(error);
  }
}

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

function renderMessages() {
  ui.messages.replaceChildren();
  const c = state.current;
  if (!c || c.messages.length === 0) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = 'Send a message to start.';
    ui.messages.append(p);
    return;
  }
  for (const m of c.messages) {
    const el = messageElement(m);
    if (state.streaming && state.streaming.message === m) {
      el.classList.add('streaming');
      state.streaming.el = el;
    }
    ui.messages.append(el);
  }
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

// --- settings ----------------------------------------------------------------------------------

function fillSettingsForm() {
  for (const el of ui.settings.elements) if (el.name in state.settings) el.value = state.settings[el.name];
}

ui.settings.addEventListener('input', (e) => {
  if (!(e.target.name in state.settings)) return;
  state.settings[e.target.name] = e.target.value;
  saveSettings(state.settings);
});
ui.apiKey.addEventListener('change', () => loadModels());
ui.settings.addEventListener('submit', (e) => e.preventDefault());
ui.settingsToggle.addEventListener('click', () => showSettings(ui.settings.hidden));

function showSettings(open) {
  ui.settings.hidden = !open;
  ui.settingsToggle.setAttribute('aria-expanded', String(open));
}

// --- models ------------------------------------------------------------------------------------

let modelRetry = null;

async function loadModels() {
  clearTimeout(modelRetry);
  try {
    const ids = await listModels(state.settings.apiKey);
    if (ids.length === 0) {
      // /v1/models is empty while the server loads its models.
      setStatus('The server is loading its model…');
      modelRetry = setTimeout(loadModels, 1000);
      return;
    }
    ui.model.replaceChildren(...ids.map((id) => new Option(id, id)));
    if (ids.includes(state.settings.model)) ui.model.value = state.settings.model;
    setStatus('');
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      setStatus('This server needs an API key: enter it in Settings.', true);
      showSettings(true);
      ui.apiKey.focus();
    } else {
      setStatus(`Cannot list the models: ${e.message}`, true);
      modelRetry = setTimeout(loadModels, 3000);
    }
  }
}

ui.model.addEventListener('change', () => {
  state.settings.model = ui.model.value;
  saveSettings(state.settings);
});

// --- sending -----------------------------------------------------------------------------------

// The request body from the settings and the conversation. Throws Error with a message for
// the user when a setting cannot be sent.
function requestBody(conversation) {
  const s = state.settings;
  const messages = [];
  if (s.system.trim() !== '') messages.push({ role: 'system', content: s.system });
  // A failed turn (an empty answer: an error, or stopped before any text) is not history, its
  // question included: two user messages in a row would be refused by templates that insist on
  // alternating roles, and every later message of the conversation with them.
  const all = conversation.messages;
  for (let i = 0; i < all.length; i++) {
    const m = all[i];
    if (m.role === 'assistant' && m.content === '') continue;
    const next = all[i + 1];
    if (m.role === 'user' && next && next.role === 'assistant' && next.content === '') continue;
    messages.push({ role: m.role, content: m.content });
  }
  const body = { messages, stream_options: { include_usage: true } };
  if (ui.model.value) body.model = ui.model.value;
  // Numbers as typed: the server says what it refuses (a negative max_tokens is its 400).
  for (const name of ['temperature', 'top_p', 'max_tokens', 'seed']) {
    if (String(s[name]).trim() === '') continue;
    const v = Number(s[name]);
    if (!Number.isFinite(v)) throw new Error(`Settings: ${name} is not a number`);
    body[name] = v;
  }
  if (s.extra.trim() !== '') {
    let extra;
    try {
      extra = JSON.parse(s.extra);
    } catch (e) {
      throw new Error(`Settings: the extra request fields are not JSON (${e.message})`);
    }
    if (!extra || typeof extra !== 'object' || Array.isArray(extra))
      throw new Error('Settings: the extra request fields must be a JSON object');
    Object.assign(body, extra);
  }
  return body;
}

function setStreaming(on) {
  ui.send.hidden = on;
  ui.stop.hidden = !on;
}

// Redraws the streaming answer at most once per frame.
let redrawQueued = false;
function redrawStreaming() {
  if (redrawQueued) return;
  redrawQueued = true;
  requestAnimationFrame(() => {
    redrawQueued = false;
    const s = state.streaming;
    if (!s || !s.el || !s.el.isConnected) return;
    const stick = nearBottom();
    fillMessage(s.el, s.message);
    if (stick) ui.messages.scrollTop = ui.messages.scrollHeight;
  });
}

async function send(text) {
  if (!state.current) {
    state.current = newConversation();
    state.conversations.unshift(state.current);
  }
  const c = state.current;
  c.messages.push({ role: 'user', content: text });
  if (!c.titleSet && c.messages.filter((m) => m.role === 'user').length === 1) c.title = autoTitle(text);
  const answer = { role: 'assistant', content: '', pending: true };
  let body;
  try {
    body = requestBody(c);
  } catch (e) {
    answer.error = e.message;
    delete answer.pending;
  }
  c.messages.push(answer);
  c.updated = Date.now();
  sortConversations();
  persist();
  renderList();
  if (!body) {
    renderMessages();
    return;
  }

  const controller = new AbortController();
  state.streaming = { conversation: c, message: answer, controller, el: null };
  setStreaming(true);
  renderMessages();

  // Timing: ttft from the request, tok/s over the decode (first to last token).
  const t0 = performance.now();
  let tFirst = null;
  let tLast = null;
  let chunks = 0;
  let usage = null;
  let lastSave = t0;
  try {
    for await (const chunk of streamChat(body, state.settings.apiKey, controller.signal)) {
      if (chunk.usage) usage = chunk.usage;
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && (delta.content || delta.reasoning_content)) {
        const now = performance.now();
        if (tFirst === null) tFirst = now;
        tLast = now;
        chunks++;
        if (delta.reasoning_content) answer.reasoning = (answer.reasoning || '') + delta.reasoning_content;
        if (delta.content) answer.content += delta.content;
        redrawStreaming();
        // A reload mid-answer keeps what came so far.
        if (now - lastSave > 1000) {
          lastSave = now;
          persist();
        }
      }
      if (chunk.model) answer.model = chunk.model;
    }
  } catch (e) {
    if (e.name === 'AbortError') answer.stopped = true;
    else answer.error = e instanceof ApiError ? `Server error ${e.message}` : `Request failed: ${e.message}`;
  }
  // Without usage (stopped, or an error mid-stream) the count is the chunks seen: one token each.
  const tokens = usage ? usage.completion_tokens : chunks;
  if (tFirst !== null) {
    const decode_s = (tLast - tFirst) / 1000;
    answer.stats = {
      tokens,
      tok_s: tokens > 1 && decode_s > 0 ? (tokens - 1) / decode_s : null,
      ttft_ms: tFirst - t0,
      model: answer.model || body.model || null,
      stopped: !!answer.stopped,
    };
  }
  delete answer.pending;
  delete answer.model;
  state.streaming = null;
  setStreaming(false);
  c.updated = Date.now();
  persist();
  if (state.current === c) renderMessages();
}

function stop() {
  if (state.streaming) state.streaming.controller.abort();
}

ui.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = ui.prompt.value;
  if (text.trim() === '' || state.streaming) return;
  ui.prompt.value = '';
  send(text);
});
ui.prompt.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    ui.composer.requestSubmit();
  }
});
ui.stop.addEventListener('click', stop);
ui.newChat.addEventListener('click', () => {
  if (state.current && state.current.messages.length === 0) return select(state.current);
  const c = newConversation();
  state.conversations.unshift(c);
  select(c);
});

// --- start -------------------------------------------------------------------------------------

// An answer that was streaming when the page went away ends as stopped.
for (const c of state.conversations)
  for (const m of c.messages)
    if (m.pending) {
      delete m.pending;
      m.stopped = true;
    }
sortConversations();
state.current = state.conversations[0] || null;
fillSettingsForm();
renderList();
renderMessages();
loadModels();
