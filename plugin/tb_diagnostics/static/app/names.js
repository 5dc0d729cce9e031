// Run, worker, span and file names are the file system's bytes. A name that is not
// UTF-8 (a Latin-1 "caf\xe9" directory) arrives in the plugin's JSON as the string
// Python lists it as: each undecodable byte a lone surrogate U+DC80..U+DCFF ("caf\udce9",
// Python's surrogateescape). encodeURIComponent throws on a lone surrogate and
// URLSearchParams turns it into U+FFFD, either way losing the name; these helpers keep
// it exact in URLs (the byte back as %E9, which the plugin decodes to the same name)
// and show it with U+FFFD.

const isEscapedByte = (c) => c >= 0xdc80 && c <= 0xdcff;
const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

/** ``name`` percent-encoded with its original bytes: encodeURIComponent, except that an
 * escaped byte U+DC80..U+DCFF becomes that byte's %XX. */
export function encodeName(name) {
  const s = String(name);
  try {
    return encodeURIComponent(s);
  } catch {
    /* a lone surrogate: encode code unit by code unit */
  }
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (isHigh(c) && isLow(s.charCodeAt(i + 1))) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (isEscapedByte(c)) {
      out += `%${(c - 0xdc00).toString(16).toUpperCase()}`;
    } else if (isHigh(c) || isLow(c)) {
      out += "%EF%BF%BD"; // a lone surrogate that stands for no byte (none comes from Python)
    } else {
      out += encodeURIComponent(s[i]);
    }
  }
  return out;
}

/** UTF-8 ``bytes`` as a string, each byte of an invalid sequence as U+DC00 + byte
 * (Python's ``bytes.decode("utf-8", "surrogateescape")``). */
function decodeEscaped(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i];
    if (b < 0x80) {
      out += String.fromCharCode(b);
      i++;
      continue;
    }
    // The sequence's length and its smallest code point (shorter forms are invalid).
    const [n, min, bits] = b >= 0xc2 && b <= 0xdf ? [1, 0x80, b & 0x1f]
      : b >= 0xe0 && b <= 0xef ? [2, 0x800, b & 0x0f]
        : b >= 0xf0 && b <= 0xf4 ? [3, 0x10000, b & 0x07] : [0, 0, 0];
    let cp = bits;
    let ok = n > 0;
    for (let k = 1; ok && k <= n; k++) {
      const c = bytes[i + k];
      ok = c !== undefined && (c & 0xc0) === 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (ok) {
      out += String.fromCodePoint(cp);
      i += n + 1;
    } else {
      out += String.fromCharCode(0xdc00 + b);
      i++;
    }
  }
  return out;
}

/** The inverse of encodeName (and of Python's ``quote(name, errors="surrogateescape")``):
 * decodeURIComponent, except that bytes that are not UTF-8 come back as U+DC80..U+DCFF
 * where decodeURIComponent would throw. */
export function decodeName(text) {
  const s = String(text);
  try {
    return decodeURIComponent(s);
  } catch {
    /* not UTF-8 (or a stray %): decode each run of escapes on its own */
  }
  return s.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    const bytes = [];
    for (let i = 0; i < run.length; i += 3) bytes.push(parseInt(run.slice(i + 1, i + 3), 16));
    return decodeEscaped(bytes);
  });
}

/** ``?k=v&…`` of ``params``, as URLSearchParams would write it but with exact names
 * (URLSearchParams turns an escaped byte into U+FFFD). */
export function queryString(params) {
  return `?${Object.entries(params).map(([k, v]) => `${encodeName(k)}=${encodeName(v)}`).join("&")}`;
}

/** ``text`` for display: each lone surrogate as U+FFFD. */
export function shownName(text) {
  const s = String(text);
  if (s.toWellFormed) return s.toWellFormed();
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    "\ufffd");
}
