// What the chat keeps in the browser (localStorage): the conversations and the settings. Nothing
// here talks to the server. A storage that is full or disabled loses the save, not the page.

const CONVERSATIONS = 'jitllm.webui.conversations';
const SETTINGS = 'jitllm.webui.settings';

export const DEFAULT_SETTINGS = {
  apiKey: '',
  model: '',
  system: '',
  temperature: '0.8',
  top_p: '0.95',
  max_tokens: '256',
  seed: '',
  extra: '',  // JSON object merged into every request body, e.g. {"top_k": 40}
};

function read(key, fallback) {
  try {
    const text = localStorage.getItem(key);
    return text === null ? fallback : JSON.parse(text);
  } catch {
    return fallback;
  }
}

// Returns the error when the save failed (quota, private mode), null when it worked.
function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
    return null;
  } catch (e) {
    return e;
  }
}

// [{id, title, titleSet, updated, messages: [{role, content, stats?, error?, stopped?,
// pending?}]}], most recently updated first.
export function loadConversations() {
  const list = read(CONVERSATIONS, []);
  if (!Array.isArray(list)) return [];
  return list.filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages));
}

export function saveConversations(list) {
  return write(CONVERSATIONS, list);
}

export function loadSettings() {
  const s = read(SETTINGS, {});
  return { ...DEFAULT_SETTINGS, ...(s && typeof s === 'object' ? s : {}) };
}

export function saveSettings(settings) {
  return write(SETTINGS, settings);
}

export function newConversation() {
  const id = Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
  return { id, title: 'New chat', titleSet: false, updated: Date.now(), messages: [] };
}

// A title from the first user message: its first line, cut at a word near 40 characters.
export function autoTitle(text) {
  const line = text.trim().split('\n')[0].trim();
  if (line.length <= 40) return line || 'New chat';
  const cut = line.slice(0, 40);
  const space = cut.lastIndexOf(' ');
  return (space > 20 ? cut.slice(0, space) : cut) + '…';
}
