#!/usr/bin/env node
// The reference JSONata implementation (jsonata-js, pinned in package.json at the version AWS
// documents) for the local AWS and the tests. One process answers a whole batch:
//   stdin:  {"mode": "parse" | "evaluate", "expressions": ["...", ...]}
//   stdout: {"version": "<jsonata version>", "results": [...]} (one result per expression)
// parse:    null, or {"code", "message", "position", "token"} of the parse error
// evaluate: {"value": <json>}, {"undefined": true}, or {"error": {"code", "message"}}
// $uuid and $hash are registered as local_aws/jsonata_eval.py registers them.
'use strict';

const crypto = require('crypto');

let jsonata;
let version;
try {
  jsonata = require('jsonata');
  ({ version } = require('jsonata/package.json'));
} catch (error) {
  process.stderr.write(`cannot load the npm package jsonata: ${String(error.message).split('\n')[0]}\n`);
  process.exit(3);
}

const HASH_ALGORITHMS = {
  MD5: 'md5',
  'SHA-1': 'sha1',
  'SHA-256': 'sha256',
  'SHA-384': 'sha384',
  'SHA-512': 'sha512',
};

// Python's json.dumps(..., separators=(",", ":")) escapes every non-ASCII character.
function asciiJson(value) {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
  );
}

function hash(value, algorithm) {
  const name = HASH_ALGORITHMS[String(algorithm)];
  if (name === undefined) {
    throw { code: 'HASH', message: `$hash: unsupported algorithm ${algorithm}` };
  }
  const text = typeof value === 'string' ? value : asciiJson(value);
  return crypto.createHash(name).update(text, 'utf8').digest('hex');
}

function describe(error) {
  return {
    code: error && error.code ? String(error.code) : null,
    message: error && error.message ? String(error.message) : String(error),
    position: error && typeof error.position === 'number' ? error.position : null,
    token: error && error.token !== undefined ? String(error.token) : null,
  };
}

function parse(expression) {
  try {
    jsonata(expression);
    return null;
  } catch (error) {
    return describe(error);
  }
}

async function evaluate(expression) {
  try {
    const compiled = jsonata(expression);
    compiled.registerFunction('uuid', () => crypto.randomUUID());
    compiled.registerFunction('hash', hash);
    const value = await compiled.evaluate(undefined);
    if (value === undefined) {
      return { undefined: true };
    }
    return { value: JSON.parse(JSON.stringify(value)) };
  } catch (error) {
    const { code, message } = describe(error);
    return { error: { code, message } };
  }
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk);
  }
  const request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const expressions = request.expressions;
  if (!Array.isArray(expressions) || !expressions.every((e) => typeof e === 'string')) {
    throw new Error('expressions must be a list of strings');
  }
  let results;
  if (request.mode === 'parse') {
    results = expressions.map(parse);
  } else if (request.mode === 'evaluate') {
    results = [];
    for (const expression of expressions) {
      results.push(await evaluate(expression));
    }
  } else {
    throw new Error(`unknown mode ${JSON.stringify(request.mode)}`);
  }
  process.stdout.write(JSON.stringify({ version, results }));
}

main().catch((error) => {
  process.stderr.write(`${error && error.message ? error.message : error}\n`);
  process.exit(2);
});
