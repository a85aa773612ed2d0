// The web chat in headless chromium (playwright-core), against a jitllmd that requires an API
// key: the key asked for and kept, the model picker, a streamed answer with tokens/s, a stop that
// the server sees (its cancelled-sessions counter), conversations kept over a reload, rename and
// delete, server errors shown in the chat (a 400, errors inside a stream), and model text
// rendered as text (no HTML from it).
// Usage: node webui.mjs URL API_KEY CHROMIUM [SCREENSHOT.png]   (run by webui.sh)
import { chromium } from 'playwright-core';

const [url, apiKey, executablePath, screenshot] = process.argv.slice(2);
const t0 = Date.now();
const log = (what) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
function check(ok, what) {
  if (!ok) throw new Error(what);
}

async function metric(name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`jitllm_${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

const lastAnswer = '.msg.assistant >> nth=-1';

// Types a message, sends it with Enter, and waits until its answer has ended (stats or error).
async function sendAndWait(page, text) {
  const before = await page.locator('.msg.assistant').count();
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
  await page.waitForFunction((n) => {
    const all = document.querySelectorAll('.msg.assistant');
    return all.length > n && !all[n].classList.contains('streaming') &&
      all[n].querySelector('.stats, .error');
  }, before, { timeout: 30000 });
}

async function setSetting(page, name, value) {
  if (await page.isHidden('#settings')) await page.click('#settings-toggle');
  await page.fill(`#settings [name="${name}"]`, value);
}

async function chat(browser) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  // Console errors other than the two refusals this test asks for (401 before the key, the bad
  // max_tokens' 400) fail it: a CSP violation or a script error shows up there.
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (401|400)/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => d.accept(d.type() === 'prompt' ? 'Renamed chat' : undefined));

  // 1. The page loads without the key and asks for it; with it, the picker lists the model.
  const res = await page.goto(url + '/');
  check(res.status() === 200, `GET / in the browser: ${res.status()}`);
  await page.waitForFunction(() => /API key/.test(document.getElementById('server-status').textContent));
  check(await page.isVisible('#api-key'), 'the settings with the key field did not open on a 401');
  await page.fill('#api-key', apiKey);
  await page.press('#api-key', 'Tab');  // change: the model list is asked for again
  await page.waitForSelector('#model option[value="demo"]', { state: 'attached' });
  const served = (await (await fetch(`${url}/v1/models`, { headers: { Authorization: `Bearer ${apiKey}` } })).json())
    .data.map((m) => m.id);
  const listed = await page.$$eval('#model option', (os) => os.map((o) => o.value));
  check(JSON.stringify(listed) === JSON.stringify(served), `picker ${listed} != /v1/models ${served}`);
  log(`model picker: ${listed}`);

  // 2. A streamed answer with its statistics.
  await setSetting(page, 'seed', '7');
  await setSetting(page, 'max_tokens', '64');
  await sendAndWait(page, 'Hello! What is a Python list?');
  const first = page.locator(lastAnswer);
  check(!(await first.locator('.error').count()), `first answer failed: ${await first.textContent()}`);
  const answer1 = await first.locator('.content').textContent();
  check(answer1.trim().length > 0, 'the answer is empty');
  const stats1 = await first.locator('.stats').textContent();
  const m1 = /^(\d+) tokens? · ([\d.]+) tok\/s · first token \d+ ms · demo$/.exec(stats1);
  check(m1 && Number(m1[1]) > 0 && Number(m1[1]) <= 64 && Number(m1[2]) > 0, `stats line '${stats1}'`);
  log(`answer: ${answer1.length} characters; ${stats1}`);

  // 3. A long answer (ignore_eos through the extra fields) grows as it streams; Stop ends it,
  // in the page and on the server (a cancelled session).
  await page.click('#new-chat');
  await setSetting(page, 'max_tokens', '440');
  await setSetting(page, 'extra', '{"ignore_eos": true}');
  const cancelled = await metric('sessions_cancelled_total');
  // The answer's length at every change of the page, recorded in the page (no round trips).
  await page.evaluate(() => {
    window.lengths = [];
    new MutationObserver(() => {
      const answers = document.querySelectorAll('.msg.assistant .content');
      if (answers.length > 0) window.lengths.push(answers[answers.length - 1].textContent.length);
    }).observe(document.getElementById('messages'), { childList: true, subtree: true, characterData: true });
  });
  await page.fill('#prompt', 'Tell me a long story.');
  await page.press('#prompt', 'Enter');
  await page.waitForFunction(() => new Set(window.lengths.filter((n) => n > 0)).size >= 4)
    .catch(() => check(false, 'the answer did not grow in 4 steps'));
  await page.click('#stop');
  const lengths = await page.evaluate(() => window.lengths);
  check(lengths.every((n, i) => i === 0 || n >= lengths[i - 1]), `lengths went back: ${lengths}`);
  await page.waitForSelector(`${lastAnswer} >> .stats:has-text("stopped")`, { timeout: 5000 })
    .catch(() => check(false, 'Stop did not end the answer within 5 s'));
  const stopped = await page.locator(`${lastAnswer} >> .content`).textContent();
  await page.waitForTimeout(600);
  check((await page.locator(`${lastAnswer} >> .content`).textContent()) === stopped, 'text still grew after Stop');
  check(await page.isVisible('#send') && await page.isHidden('#stop'), 'Send did not come back after Stop');
  const stats2 = await page.locator(`${lastAnswer} >> .stats`).textContent();
  const m2 = /^stopped · (\d+) tokens · [\d.]+ tok\/s/.exec(stats2);
  check(m2, `stopped stats '${stats2}'`);
  check(Number(m2[1]) < 440, `the answer ran to its end (${m2[1]} tokens) before Stop: the stop test needs a longer one`);
  let after = cancelled;
  for (let i = 0; i < 40 && after <= cancelled; i++) {
    await page.waitForTimeout(50);
    after = await metric('sessions_cancelled_total');
  }
  check(after > cancelled, `the server did not drop the stopped request (cancelled ${cancelled} -> ${after})`);
  log(`growth ${[...new Set(lengths)].slice(0, 8).join(',')}...; ${stats2}; server cancelled ${cancelled} -> ${after}`);

  // 4. After a reload: both conversations, their texts, the key and settings.
  await page.reload();
  await page.waitForSelector('#model option[value="demo"]', { state: 'attached' });
  const titles = await page.$$eval('#conversations .title', (bs) => bs.map((b) => b.textContent));
  check(JSON.stringify(titles) === JSON.stringify(['Tell me a long story.', 'Hello! What is a Python list?']),
    `titles after reload: ${titles}`);
  check((await page.locator(`${lastAnswer} >> .content`).textContent()) === stopped, 'stopped answer changed over the reload');
  await page.click('#conversations li:nth-child(2) .title');
  check((await page.locator(`${lastAnswer} >> .content`).textContent()) === answer1, 'first answer changed over the reload');
  check((await page.locator(`${lastAnswer} >> .stats`).textContent()) === stats1, 'first stats changed over the reload');
  check(await page.inputValue('#settings [name="extra"]') === '{"ignore_eos": true}', 'settings not kept');
  // Rename and delete (the dialogs are accepted above).
  await page.click('#conversations li:nth-child(2) .rename');
  await page.waitForSelector('#conversations .title:has-text("Renamed chat")');
  await page.click('#conversations li:nth-child(1) .delete');
  await page.waitForFunction(() => document.querySelectorAll('#conversations li').length === 1);
  log('reload kept both conversations; rename and delete work');

  // 5. A request the server refuses: its error in the chat, not a silent nothing.
  await setSetting(page, 'extra', '');
  await setSetting(page, 'max_tokens', '-5');
  await page.click('#new-chat');
  await sendAndWait(page, 'An answer of -5 tokens?');
  const error = await page.locator(`${lastAnswer} >> .error`).textContent();
  check(/^Server error 400: .*max_tokens/.test(error), `error shown: '${error}'`);
  log(`error shown: ${error}`);
  // The failed turn is not history: the next message of this conversation is sent without its
  // question (two user messages in a row are refused by templates that want alternating roles).
  await setSetting(page, 'max_tokens', '16');
  const next = page.waitForRequest('**/v1/chat/completions');
  await sendAndWait(page, 'And now?');
  const history = JSON.parse((await next).postData()).messages.filter((m) => m.role !== 'system');
  check(history.length === 1 && history[0].content === 'And now?',
        `a failed turn was sent as history: ${JSON.stringify(history)}`);
  log('a failed turn is left out of the next request');
  // An error event inside a 200 stream (what the server sends when the model's output turns
  // NaN) and a stream cut without [DONE]: played by the browser's network layer, since the
  // demo model gives neither.
  await setSetting(page, 'max_tokens', '16');
  const streams = [
    ['data: {"choices":[{"index":0,"delta":{"content":"Half an"}}]}\n\n' +
     'data: {"error":{"message":"the model\'s output is not usable: logits are NaN","code":"model_output_invalid"}}\n\n' +
     'data: [DONE]\n\n', /^Server error in the stream: the model's output is not usable: logits are NaN$/],
    ['data: {"choices":[{"index":0,"delta":{"content":"Half an"}}]}\n\n',
     /^Server error in the stream: it ended without \[DONE\]/],
  ];
  for (const [body, shown] of streams) {
    await page.route('**/v1/chat/completions', (route) =>
      route.fulfill({ status: 200, contentType: 'text/event-stream', body }));
    await sendAndWait(page, 'A stream that fails');
    await page.unroute('**/v1/chat/completions');
    const partial = await page.locator(`${lastAnswer} >> .content`).textContent();
    const streamError = await page.locator(`${lastAnswer} >> .error`).textContent();
    check(partial === 'Half an' && shown.test(streamError), `stream error: '${partial}' / '${streamError}'`);
  }
  log('errors inside a stream shown after the text that came');

  // 6. Model text is text: the renderer alone, then a stored conversation through the page.
  const unit = await page.evaluate(async () => {
    const { renderMarkdown } = await import('./render.js');
    const html = (text) => {
      const div = document.createElement('div');
      div.append(renderMarkdown(text));
      return div;
    };
    const img = html('<img src=x onerror="window.__xss=1"> <b>bold?</b>');
    const mixed = html('**bold** `<b>x</b>` [bad](javascript:window.__xss=2) [ok](https://example.com/a)');
    const fence = html('```html\n<script>window.__xss=3</script>\n```\n- one\n- two\n\n1. three');
    return {
      imgElements: img.querySelectorAll('*').length,
      imgText: img.textContent,
      strong: mixed.querySelector('strong')?.textContent,
      code: mixed.querySelector('code')?.textContent,
      hrefs: [...mixed.querySelectorAll('a')].map((a) => a.getAttribute('href')),
      mixedText: mixed.textContent,
      fenceCode: fence.querySelector('pre code')?.textContent,
      scripts: fence.querySelectorAll('script').length,
      items: [...fence.querySelectorAll('ul li, ol li')].map((li) => li.parentNode.tagName + ':' + li.textContent),
    };
  });
  const expected = {
    imgElements: 1,  // the <p>
    imgText: '<img src=x onerror="window.__xss=1"> <b>bold?</b>',
    strong: 'bold',
    code: '<b>x</b>',
    hrefs: ['https://example.com/a'],
    mixedText: 'bold <b>x</b> [bad](javascript:window.__xss=2) ok',
    fenceCode: '<script>window.__xss=3</script>',
    scripts: 0,
    items: ['UL:one', 'UL:two', 'OL:three'],
  };
  check(JSON.stringify(unit) === JSON.stringify(expected),
    `renderMarkdown:\n  got      ${JSON.stringify(unit)}\n  expected ${JSON.stringify(expected)}`);
  const payload = 'Look: <img src=x onerror="window.__xss=4"><script>window.__xss=5</script> **done**';
  const thought = 'Hm <img src=r onerror="window.__xss=8"> **no markdown**';
  await page.evaluate(([text, reasoning]) => {
    const list = JSON.parse(localStorage.getItem('jitllm.webui.conversations'));
    list.push({ id: 'xss', title: '<img src=y onerror="window.__xss=6">', titleSet: true, updated: Date.now() + 1e6,
      messages: [{ role: 'user', content: '<img src=z onerror="window.__xss=7">' },
                 { role: 'assistant', content: text, reasoning }] });
    localStorage.setItem('jitllm.webui.conversations', JSON.stringify(list));
  }, [payload, thought]);
  await page.reload();
  await page.waitForSelector('.msg.assistant');
  const shown = await page.evaluate(() => ({
    xss: window.__xss,
    images: document.querySelectorAll('img, script:not([src])').length,
    bold: document.querySelector('.msg.assistant strong')?.textContent,
    text: document.querySelector('.msg.assistant .content').textContent,
    user: document.querySelector('.msg.user .content').textContent,
    title: document.querySelector('#conversations li.current .title').textContent,
    thought: document.querySelector('.msg.assistant details.thinking .thought')?.textContent,
    folded: !document.querySelector('.msg.assistant details.thinking')?.open,
  }));
  check(shown.xss === undefined && shown.images === 0 && shown.bold === 'done',
    `HTML from model text reached the page: ${JSON.stringify(shown)}`);
  check(shown.text === payload.replace('**done**', 'done'), `model text shown as '${shown.text}'`);
  check(shown.user.startsWith('<img') && shown.title.startsWith('<img'), `user text or title: ${JSON.stringify(shown)}`);
  check(shown.thought === thought && shown.folded, `reasoning shown as ${JSON.stringify(shown)}`);
  log('model text and reasoning with <img onerror> and <script> rendered as text');

  check(problems.length === 0, `browser errors:\n  ${problems.join('\n  ')}`);
  await context.close();
}

// A short conversation in a fresh browser, for docs/webui.png.
async function takeScreenshot(browser, path) {
  const context = await browser.newContext({ viewport: { width: 960, height: 600 }, colorScheme: 'light' });
  const page = await context.newPage();
  await page.goto(url + '/');
  await page.fill('#api-key', apiKey);
  await page.press('#api-key', 'Tab');
  await page.waitForSelector('#model option[value="demo"]', { state: 'attached' });
  await setSetting(page, 'seed', '3');
  await setSetting(page, 'max_tokens', '80');
  await page.click('#settings-toggle');
  await sendAndWait(page, 'What does the open() function return?');
  await sendAndWait(page, 'And how do I read a file line by line?');
  await page.screenshot({ path });
  log(`screenshot: ${path}`);
  await context.close();
}

// A container's small /dev/shm would crash the renderer: shared memory goes to /tmp instead.
const browser = await chromium.launch({ executablePath, headless: true, args: ['--disable-dev-shm-usage'] });
try {
  log(`chromium ${browser.version()}`);
  await chat(browser);
  if (screenshot) await takeScreenshot(browser, screenshot);
} finally {
  await browser.close();
}
log('ok');
