// Model text -> DOM: a small Markdown subset (fenced code, headings, lists, paragraphs, `code`,
// **bold**, *italic*, [links](https://...)). Every piece of text becomes a Text node and every
// element is made by createElement, never by parsing HTML, so text such as
// <img src=x onerror=...> shows as itself. Links keep only http(s) addresses.

// The earliest inline construct in a string: `code`, **bold**, *italic* / _italic_, [text](url).
// Groups: 1 code, 2 bold, 3 italic's delimiter, 4 italic, 5 link text, 6 link address.
const INLINE = /`([^`\n]+)`|\*\*(.+?)\*\*|(?:^|(?<=[\s(]))([*_])([^*_\s](?:[^*_\n]*[^*_\s])?)\3|\[([^\]\n]+)\]\(([^)\s]+)\)/;

function safeHref(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}

// Appends `text` with its inline constructs to `parent`.
function appendInline(parent, text) {
  while (text.length > 0) {
    const m = INLINE.exec(text);
    if (!m) {
      parent.append(document.createTextNode(text));
      return;
    }
    if (m.index > 0) parent.append(document.createTextNode(text.slice(0, m.index)));
    if (m[1] !== undefined) {
      const code = document.createElement('code');
      code.textContent = m[1];
      parent.append(code);
    } else if (m[2] !== undefined) {
      const b = document.createElement('strong');
      appendInline(b, m[2]);
      parent.append(b);
    } else if (m[4] !== undefined) {
      const i = document.createElement('em');
      appendInline(i, m[4]);
      parent.append(i);
    } else {
      const href = safeHref(m[6]);
      if (href) {
        const a = document.createElement('a');
        a.href = href;
        a.rel = 'noopener noreferrer';
        a.target = '_blank';
        appendInline(a, m[5]);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(m[0]));  // javascript: and the like stay text
      }
    }
    text = text.slice(m.index + m[0].length);
  }
}

// Lines of one paragraph keep their breaks (models write poems and addresses too).
function appendLines(parent, lines) {
  lines.forEach((line, i) => {
    if (i > 0) parent.append(document.createElement('br'));
    appendInline(parent, line);
  });
}

const FENCE = /^\s*```\s*([\w+.-]*)\s*$/;
const HEADING = /^(#{1,4})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;

// The whole text as a fragment of block elements. An unclosed fence (a stream still writing
// its code block) runs to the end.
export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let para = [];
  let list = null;  // {el, re}
  const flush = () => {
    if (para.length > 0) {
      const p = document.createElement('p');
      appendLines(p, para);
      out.append(p);
      para = [];
    }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !FENCE.test(lines[i]); i++) body.push(lines[i]);
      const pre = document.createElement('pre');
      const code = document.createElement('code');
      if (fence[1]) code.dataset.lang = fence[1];
      code.textContent = body.join('\n');
      pre.append(code);
      out.append(pre);
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      const h = document.createElement('h' + (heading[1].length + 2));  // h3..h6 inside a message
      appendInline(h, heading[2]);
      out.append(h);
      continue;
    }
    const item = BULLET.exec(line) ? [BULLET, 'ul'] : NUMBERED.exec(line) ? [NUMBERED, 'ol'] : null;
    if (item) {
      if (para.length > 0 || !list || list.re !== item[0]) {
        flush();
        list = { el: document.createElement(item[1]), re: item[0] };
        out.append(list.el);
      }
      const li = document.createElement('li');
      appendInline(li, item[0].exec(line)[1]);
      list.el.append(li);
      continue;
    }
    if (list) list = null;
    para.push(line);
  }
  flush();
  return out;
}
