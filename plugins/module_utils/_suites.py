# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prompt suites shipped with the collection, by category.

Speculative decoding gains depend on the text: n-gram (prompt lookup) drafting only pays when the
answer can copy spans of the prompt, draft models when the text is predictable. So the suites
differ in what the answer can copy:
- reasoning: short, fresh questions; nothing to copy (n-gram acceptance should be low).
- coding: code to modify or extend; answers repeat identifiers and whole lines.
- chat: everyday requests of ordinary length; little to copy.
- summarise: a long passage to summarise or extract from; answers quote it.
- repetitive: structured text (tables, configs, logs) to reproduce with small changes; answers copy
  most of the prompt, the best case for n-gram drafting.
"""
from __future__ import annotations

import hashlib
import json

_REPORT = (
    "Quarterly operations report, storage cluster east-2. During the quarter the cluster served "
    "an average of 41,000 read requests per second and 9,500 write requests per second. Peak "
    "read traffic reached 77,000 requests per second on the last Monday of the quarter, when a "
    "batch analytics job was started without the usual rate limit. The job was paused after "
    "eleven minutes; no customer requests failed, but the 99th percentile read latency rose from "
    "8 milliseconds to 31 milliseconds for the duration. Disk failures: 14 drives failed out of "
    "2,304, an annualised failure rate of 2.4 percent, slightly above the 2.1 percent of the "
    "previous quarter. All 14 rebuilds completed within the 6 hour objective; the longest took "
    "4 hours and 50 minutes. Capacity: used capacity grew from 61 percent to 68 percent. At the "
    "current growth rate the cluster reaches the 80 percent planning threshold in about five "
    "months, so the procurement of 96 additional nodes has been requested. Incidents: one "
    "incident of severity two occurred when a configuration change disabled compression on one "
    "rack, which increased write amplification; it was detected by the capacity alert after "
    "three hours and reverted. Action items: add a rate limit check to the batch job launcher, "
    "add a configuration lint rule for compression settings, and review the drive vendor's "
    "firmware advisory.")

_ARTICLE = (
    "The city council met on Tuesday evening to discuss the proposal to convert the old railway "
    "depot on Mill Street into a community workshop and library annex. The depot, built in 1911, "
    "has been empty since the freight line closed in 1987. Supporters said the building's large "
    "open hall is ideal for a workshop with shared tools, and that the neighbourhood has had no "
    "library branch since the Elm Road branch closed in 2015. Opponents raised the cost of "
    "removing asbestos from the roof, estimated at 1.2 million, and the lack of parking. The "
    "council's engineer reported that the brick walls and the iron roof trusses are sound, but "
    "that the floor must be replaced and the roof insulated. The total renovation cost is "
    "estimated at 4.8 million, of which a regional heritage fund would cover 1.5 million if the "
    "application is made before March. Several residents spoke in favour, including a retired "
    "carpenter who offered to run evening classes, and a parent who said teenagers in the area "
    "have nowhere to go after school. A shop owner on Mill Street asked for a traffic study "
    "before any decision. The council voted seven to two to commission a detailed design and a "
    "traffic study, and to apply for the heritage fund, with a final vote on construction "
    "expected in the autumn.")

_ARTICLE_V2 = (_ARTICLE
               .replace('seven to two', 'six to three')
               .replace('4.8 million', '5.1 million')
               .replace('before March', 'before the end of February')
               .replace('A shop owner on Mill Street asked for a traffic study before any decision. ',
                        'A shop owner on Mill Street asked for a traffic study before any decision, and '
                        'two residents asked for a parking plan. '))

_MAIL_1 = (
    "Hi all, the nightly backup of the billing database failed again last night with the error "
    "'snapshot quota exceeded for project billing-prod'. This is the third failure this month. "
    "I raised the quota from 50 to 80 snapshots as a stop-gap, but we need to decide on a "
    "retention policy. Right now we keep every nightly snapshot for 90 days. Could the owners of "
    "billing confirm whether 35 days of nightly snapshots plus 12 monthly snapshots is enough "
    "for the audit requirements? Thanks, Priya")
_MAIL_2 = (
    "Thanks Priya. For the audit we need monthly snapshots for 12 months and daily ones for 30 "
    "days, so 35 days of nightly snapshots plus 12 monthly snapshots works for us. Please make "
    "sure the monthly ones are taken on the first day of the month. Regards, Tom")
_MAIL_3 = (
    "Sounds good to me. One more thing: the restore test has not run since the quota change, "
    "so please run it before we change the retention policy. Ana")


def _quoted(text, depth):
    """An email quote: one sentence per line, each prefixed with '> ' per level."""
    return '\n'.join(('> ' * depth) + line for line in text.replace('. ', '.\n').split('\n'))


_THREAD = '\n\n'.join([
    'From: Ana\n' + _MAIL_3 + '\n\nOn Tuesday Tom wrote:\n' + _quoted(_MAIL_2, 1)
    + '\n> On Monday Priya wrote:\n' + _quoted(_MAIL_1, 2),
    'From: Tom\n' + _MAIL_2 + '\n\nOn Monday Priya wrote:\n' + _quoted(_MAIL_1, 1),
    'From: Priya\n' + _MAIL_1])

_CODE = '''def load_users(path):
    users = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            name, email, role = line.split(',')
            users.append({'name': name, 'email': email, 'role': role})
    return users


def find_admins(users):
    admins = []
    for user in users:
        if user['role'] == 'admin':
            admins.append(user)
    return admins


def find_editors(users):
    editors = []
    for user in users:
        if user['role'] == 'editor':
            editors.append(user)
    return editors


def find_auditors(users):
    auditors = []
    for user in users:
        if user['role'] == 'auditor':
            auditors.append(user)
    return auditors
'''

_TABLE = '\n'.join(
    '| web-%02d | 10.20.%d.%d | %s | %d | %s |' % (
        i, i // 8, 10 + i, ('eu-west-1a', 'eu-west-1b', 'eu-west-1c')[i % 3], 8 + (i % 4) * 8,
        'active' if i % 5 else 'draining')
    for i in range(1, 25))

_UNIT = '''[Unit]
Description=Inference server %s
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
User=inference
Environment=CUDA_VISIBLE_DEVICES=%s
ExecStart=/opt/venv/bin/vllm serve /models/llama-3.1-8b --host 0.0.0.0 --port %d --tensor-parallel-size 1 --gpu-memory-utilization 0.90
Restart=always
RestartSec=5
TimeoutStopSec=120

[Install]
WantedBy=multi-user.target
'''

_LOG = '\n'.join(
    '2026-11-02T08:%02d:%02dZ INFO request_id=%06d method=POST path=/v1/completions status=%d '
    'prompt_tokens=%d completion_tokens=%d latency_ms=%d' % (
        i // 2, (i * 17) % 60, 418000 + i, 200 if i % 9 else 503, 120 + i * 7, 256 if i % 9 else 0,
        900 + (i * 37) % 400 if i % 9 else 12)
    for i in range(40))

SUITES = {
    'reasoning': [
        "A train leaves at 14:35 and arrives at 18:10. How long is the journey in minutes? "
        "Explain your reasoning step by step.",
        "If three painters paint three fences in three hours, how many painters are needed to "
        "paint twelve fences in six hours? Think it through before answering.",
        "Is 391 a prime number? Show how you check it.",
        "A shop sells pencils at 3 for 40 cents. How much do 20 pencils cost, and what is the "
        "cheapest way to buy exactly 20? Reason carefully.",
        "Which is larger, 2 to the power 40 or 10 to the power 12? Justify without a calculator.",
        "Alice is older than Bob, Carol is younger than Bob, and Dan is older than Alice. Who is "
        "the second youngest? Explain.",
        "A bag holds 4 red and 6 blue marbles. Two are drawn without replacement. What is the "
        "probability that both are red? Give the steps.",
        "Why does ice float on water? Give a short physical explanation.",
    ],
    'coding': [
        "Here is a Python module:\n\n" + _CODE + "\nRefactor it: replace find_admins and "
        "find_editors with one function find_by_role(users, role), add type hints and docstrings, "
        "and show the complete new module.",
        "Here is a Python module:\n\n" + _CODE + "\nWrite pytest unit tests for load_users, "
        "find_admins and find_editors, including comments and blank lines in the input file.",
        "Write a Python function that parses a duration like '1h30m', '45s' or '2h' into seconds, "
        "with error handling and a few examples.",
        "Write a bash script that rotates log files in /var/log/myapp: compress files older than "
        "one day and delete compressed files older than fourteen days.",
        "Here is a Python module:\n\n" + _CODE + "\nConvert it to use the csv module and a "
        "dataclass User instead of dictionaries, and print the whole module.",
        "Implement an LRU cache class in Python with get and put in O(1), without functools.",
    ],
    'chat': [
        "I have a free Saturday in Lisbon. Can you suggest a relaxed plan for the day?",
        "What are some good habits for keeping a small vegetable garden healthy in summer?",
        "Can you explain the difference between a Roth IRA and a traditional IRA in simple terms?",
        "My cat keeps scratching the sofa. What can I do about it?",
        "Write a short, friendly message to a colleague who is leaving the team.",
        "What should I pack for a three-day hiking trip in the mountains in autumn?",
        "Recommend a few novels for someone who enjoyed The Remains of the Day, and say why.",
    ],
    'summarise': [
        "Summarise this email thread in five bullet points: what failed, what was decided, and "
        "what is still to do, quoting the agreed retention policy exactly:\n\n" + _THREAD,
        "Here are two drafts of a news article. Summarise the article, then list every "
        "difference between the drafts, quoting both versions of each changed sentence.\n\n"
        "Draft 1:\n" + _ARTICLE + "\n\nDraft 2:\n" + _ARTICLE_V2,
        "Summarise the following report in about 150 words, keeping every number:\n\n" + _REPORT,
        "Write a reply to this email thread that restates the decisions, quoting each one, and "
        "asks who will run the restore test:\n\n" + _THREAD,
        "Extract from this article every argument for and against the proposal, as two bullet "
        "lists that quote the article:\n\n" + _ARTICLE,
    ],
    'repetitive': [
        "Here is an inventory table:\n\n| host | ip | zone | vcpus | state |\n|---|---|---|---|---|\n"
        + _TABLE + "\n\nReproduce the whole table with one more column, `owner`, set to "
        "`platform` for every row, keeping all other values unchanged.",
        "Here are the systemd units for GPUs 0 and 1:\n\n" + (_UNIT % ('gpu0', '0', 8000)) + "\n"
        + (_UNIT % ('gpu1', '1', 8001)) + "\nWrite the units for GPUs 2 to 7 (ports 8002 to 8007), "
        "each in full.",
        "Here are access log lines:\n\n" + _LOG + "\n\nRewrite every line as a JSON object with "
        "the same fields, one object per line, in the same order.",
        "Here is an inventory table:\n\n| host | ip | zone | vcpus | state |\n|---|---|---|---|---|\n"
        + _TABLE + "\n\nSort the table by zone, then host, and print it in full.",
        "Here is a Python module:\n\n" + _CODE + "\nAdd a function find_viewers that works like "
        "find_editors, and print the complete module with it.",
    ],
}

CATEGORIES = tuple(SUITES)
SUITE_CHOICES = CATEGORIES + ('all',)


def suite_prompts(name):
    """[(category, prompt)] of a named suite; 'all' interleaves the categories."""
    if name == 'all':
        out = []
        longest = max(len(p) for p in SUITES.values())
        for i in range(longest):
            for cat in CATEGORIES:
                if i < len(SUITES[cat]):
                    out.append((cat, SUITES[cat][i]))
        return out
    if name not in SUITES:
        raise ValueError('unknown suite %r (choose from %s)' % (name, ', '.join(SUITE_CHOICES)))
    return [(name, p) for p in SUITES[name]]


def parse_prompts_file(text):
    """Prompts from a user file: JSON lines ({"prompt": ..., "category": ...}) or plain lines.

    A file whose non-blank lines all start with `{` is JSONL; otherwise one prompt per line
    (a literal `\\n` in a plain line stands for a newline). Blank lines and `#` lines are skipped.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith('#')]
    if lines and all(ln.lstrip().startswith('{') for ln in lines):
        out = []
        for n, ln in enumerate(lines, 1):
            try:
                obj = json.loads(ln)
            except ValueError as exc:
                raise ValueError('prompts file line %d: invalid JSON: %s' % (n, exc))
            prompt = obj.get('prompt') if isinstance(obj, dict) else None
            if not isinstance(prompt, str) or not prompt:
                raise ValueError('prompts file line %d: no "prompt" string' % n)
            out.append((str(obj.get('category') or 'file'), prompt))
        return out
    return [('file', ln.strip().replace('\\n', '\n')) for ln in lines]


# --------------------------------------------------------------------------- the operator's own prompts (issue 32, item 5)
#
# Random or canned prompts understate speculation (vLLM issue 52536): what a draft can guess, and what n-gram
# lookup can copy, depend on the traffic. So a switch runs on the operator's prompts when the inventory names
# them: a prompts file (what parse_prompts_file reads) or a recorded request log (OpenAI completions or chat
# request bodies, one JSON per line; also the Batch API's {"url", "body"} lines). Request logs may hold user
# data: only the prompt texts are kept (the benchmark's own max_tokens, sampling and ignore_eos stand for
# comparability), and what is reported of them is counts and a digest, never a text; errors name line numbers.

OPERATOR_FORMATS = ('auto', 'prompts', 'requests')
MAX_OPERATOR_BYTES = 64 * 1024 * 1024
MAX_OPERATOR_PROMPTS = 1000
# Keys of an OpenAI request body besides the prompt: a JSON line with one of them is a request, not a prompt entry.
_REQUEST_KEYS = ('model', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stream', 'n', 'stop',
                 'seed', 'logprobs', 'user', 'presence_penalty', 'frequency_penalty')


def _content_text(content):
    """The text of a chat message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return '\n'.join(p.get('text') for p in content
                         if isinstance(p, dict) and p.get('type') in ('text', 'input_text') and isinstance(p.get('text'), str))
    return ''


def _request_prompts(body):
    """[(category, text)] of one request body: a chat's messages flattened (``ROLE: text`` lines), a completion's
    prompt (each string of a list of them); token-id prompts and bodies without text give none."""
    if isinstance(body.get('body'), dict) and 'url' in body:  # a Batch API line
        body = body['body']
    if isinstance(body.get('messages'), list):
        lines = []
        for msg in body['messages']:
            if isinstance(msg, dict):
                text = _content_text(msg.get('content'))
                if text:
                    lines.append('%s: %s' % (msg.get('role') or 'user', text))
        return [('chat', '\n'.join(lines))] if lines else []
    prompt = body.get('prompt')
    if isinstance(prompt, str):
        return [('completions', prompt)] if prompt else []
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return [('completions', p) for p in prompt if p]
    return []


def parse_request_log(text):
    """(prompts, skipped): the prompts of a recorded request log, and how many requests had no text prompt."""
    out, skipped = [], 0
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip() or ln.lstrip().startswith('#'):
            continue
        try:
            obj = json.loads(ln)
        except ValueError as exc:
            raise ValueError('request log line %d: invalid JSON: %s' % (n, exc))
        if not isinstance(obj, dict):
            raise ValueError('request log line %d: not a JSON object (an OpenAI request body)' % n)
        got = _request_prompts(obj)
        if not got:
            skipped += 1
        out.extend(got)
    return out, skipped


def _looks_like_requests(text):
    for ln in text.splitlines():
        if not ln.strip() or ln.lstrip().startswith('#'):
            continue
        if not ln.lstrip().startswith('{'):
            return False
        try:
            obj = json.loads(ln)
        except ValueError:
            return False
        return isinstance(obj, dict) and ('messages' in obj or 'body' in obj or any(k in obj for k in _REQUEST_KEYS))
    return False


def operator_prompts(data, name, fmt='auto'):
    """(prompts, source) of an operator's prompts file or request log (``data``: its bytes; ``name``: its file name).

    ``fmt``: ``prompts`` (parse_prompts_file), ``requests`` (parse_request_log) or ``auto`` (a request log when its
    first line is a JSON object with ``messages``, ``body`` or a request key such as ``model``). At most
    MAX_OPERATOR_PROMPTS prompts are kept, the first ones. ``source``: ``{"source": "prompts_file"|"request_log",
    "name", "sha256", "bytes", "prompts", "skipped", "truncated", "categories", "synthetic": False, "suite"}``
    (``suite``: the name baselines are stored under, ``ops-`` and the digest's first 12 characters). Raises
    ValueError (line numbers, never a prompt's text).
    """
    if fmt not in OPERATOR_FORMATS:
        raise ValueError('format must be one of %s, got %r' % (', '.join(OPERATOR_FORMATS), fmt))
    if len(data) > MAX_OPERATOR_BYTES:
        raise ValueError('%d bytes, more than the %d a prompts source may have' % (len(data), MAX_OPERATOR_BYTES))
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise ValueError('not UTF-8 text (byte %d)' % exc.start)
    requests = fmt == 'requests' or (fmt == 'auto' and _looks_like_requests(text))
    skipped = 0
    if requests:
        prompts, skipped = parse_request_log(text)
    else:
        prompts = parse_prompts_file(text)
    if not prompts:
        raise ValueError('holds no prompt%s' % (' (%d request(s) without a text prompt)' % skipped if skipped else ''))
    truncated = max(0, len(prompts) - MAX_OPERATOR_PROMPTS)
    prompts = prompts[:MAX_OPERATOR_PROMPTS]
    categories = {}
    for cat, _p in prompts:
        categories[cat] = categories.get(cat, 0) + 1
    digest = hashlib.sha256(data).hexdigest()
    return prompts, {'source': 'request_log' if requests else 'prompts_file', 'name': name, 'sha256': digest,
                     'bytes': len(data), 'prompts': len(prompts), 'skipped': skipped, 'truncated': truncated,
                     'categories': categories, 'synthetic': False, 'suite': 'ops-' + digest[:12]}


def prompts_jsonl(prompts):
    """The prompts as the JSON lines parse_prompts_file reads back (what the host's benchmark is given)."""
    return ''.join(json.dumps({'prompt': p, 'category': c}, sort_keys=True) + '\n' for c, p in prompts)


def shipped_source(suite):
    """The source record of a suite shipped with the collection: synthetic prompts, not the operator's traffic."""
    return {'source': 'suite', 'name': suite, 'sha256': None, 'prompts': len(suite_prompts(suite)),
            'synthetic': True, 'suite': suite}
