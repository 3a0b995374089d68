//! Lua 5.4 pattern matching (`string.find`, `match`, `gmatch`, `gsub`) with a step meter.
//!
//! Lua's own matcher is C that backtracks without a bound (`string.rep('a*', 30) .. 'b'`
//! takes minutes) and never lets the instruction hook run. This is a faithful port of
//! `lstrlib.c`'s matcher whose every step is charged to the unit's instruction budget, so a
//! pattern costs what it does and cancellation reaches it. Semantics (classes, `%b`, `%f`,
//! back-references, position captures, anchors, `init`, plain find, every replacement kind)
//! follow Lua 5.4; the tests compare it with the C implementation.

use std::sync::{Arc, Mutex, PoisonError};

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::unit::Unit;
use crate::error::{RunError, RunErrorKind};
use crate::sandbox::values::raise;

/// Lua's capture limit.
const MAX_CAPTURES: usize = 32;
/// Lua's recursion limit for `match` (`MAXCCALLS`).
const MAX_DEPTH: usize = 200;
/// Steps are reported to the meter in batches of this size.
const BATCH: u64 = 1024;
/// `SPECIALS` of `lstrlib.c`: a pattern without any of these is searched plainly.
const SPECIALS: &[u8] = b"^$*+?.([%-";

/// Why a match stopped without an answer.
pub(crate) enum Stop {
    /// A malformed pattern or invalid capture use, in Lua's words.
    Pattern(String),
    /// The meter refused more steps (instruction budget or cancellation).
    Meter(RunError),
}

/// Receives the steps a match takes; an error aborts the match.
pub(crate) trait Meter {
    /// Accounts `steps` more steps.
    fn charge(&mut self, steps: u64) -> Result<(), RunError>;
}

type Step<T> = Result<T, Stop>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CapLen {
    Unfinished,
    Position,
    Len(usize),
}

/// A capture's value: a byte range of the subject or a 1-based position.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Capture {
    /// `subject[start..end]`.
    Text(usize, usize),
    /// A position capture `()`.
    Position(usize),
}

/// One matcher over a subject and a pattern (without its anchor).
pub(crate) struct Matcher<'a, M: Meter> {
    src: &'a [u8],
    pat: &'a [u8],
    depth: usize,
    level: usize,
    caps: [(usize, CapLen); MAX_CAPTURES],
    pending: u64,
    meter: &'a mut M,
}

impl<'a, M: Meter> Matcher<'a, M> {
    pub(crate) fn new(src: &'a [u8], pat: &'a [u8], meter: &'a mut M) -> Self {
        Self {
            src,
            pat,
            depth: MAX_DEPTH,
            level: 0,
            caps: [(0, CapLen::Unfinished); MAX_CAPTURES],
            pending: 0,
            meter,
        }
    }

    fn reset(&mut self) {
        self.depth = MAX_DEPTH;
        self.level = 0;
    }

    fn tick(&mut self, steps: u64) -> Step<()> {
        self.pending += steps;
        if self.pending >= BATCH {
            let steps = std::mem::take(&mut self.pending);
            self.meter.charge(steps).map_err(Stop::Meter)?;
        }
        Ok(())
    }

    /// Reports the steps not yet charged.
    pub(crate) fn flush(&mut self) -> Step<()> {
        let steps = std::mem::take(&mut self.pending);
        if steps > 0 {
            self.meter.charge(steps).map_err(Stop::Meter)?;
        }
        Ok(())
    }

    /// Tries the pattern at subject offset `s`; returns the end of the match.
    pub(crate) fn try_at(&mut self, s: usize) -> Step<Option<usize>> {
        self.reset();
        self.do_match(s, 0)
    }

    fn do_match(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        if self.depth == 0 {
            return Err(Stop::Pattern("pattern too complex".to_owned()));
        }
        self.depth -= 1;
        let result = self.match_here(s, p);
        self.depth += 1;
        result
    }

    fn match_here(&mut self, mut s: usize, mut p: usize) -> Step<Option<usize>> {
        loop {
            self.tick(1)?;
            let Some(&c) = self.pat.get(p) else {
                return Ok(Some(s));
            };
            let next = self.pat.get(p + 1).copied();
            match (c, next) {
                (b'(', Some(b')')) => return self.start_capture(s, p + 2, CapLen::Position),
                (b'(', _) => return self.start_capture(s, p + 1, CapLen::Unfinished),
                (b')', _) => return self.end_capture(s, p + 1),
                (b'$', None) => return Ok((s == self.src.len()).then_some(s)),
                (b'%', Some(b'b')) => match self.balance(s, p + 2)? {
                    Some(end) => {
                        s = end;
                        p += 4;
                    }
                    None => return Ok(None),
                },
                (b'%', Some(b'f')) => {
                    p += 2;
                    if self.pat.get(p) != Some(&b'[') {
                        return Err(Stop::Pattern(
                            "missing '[' after '%f' in pattern".to_owned(),
                        ));
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    let current = self.src.get(s).copied().unwrap_or(0);
                    if !self.bracket(previous, p, ep - 1) && self.bracket(current, p, ep - 1) {
                        p = ep;
                    } else {
                        return Ok(None);
                    }
                }
                (b'%', Some(digit @ b'0'..=b'9')) => match self.match_capture(s, digit)? {
                    Some(end) => {
                        s = end;
                        p += 2;
                    }
                    None => return Ok(None),
                },
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = self.pat.get(ep).copied();
                    if !self.single(s, p, ep) {
                        if matches!(suffix, Some(b'*' | b'?' | b'-')) {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        Some(b'?') => {
                            if let Some(end) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(end));
                            }
                            p = ep + 1;
                        }
                        Some(b'+') => return self.max_expand(s + 1, p, ep),
                        Some(b'*') => return self.max_expand(s, p, ep),
                        Some(b'-') => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        }
    }

    fn class_end(&self, p: usize) -> Step<usize> {
        let len = self.pat.len();
        let mut q = p + 1;
        match self.pat[p] {
            b'%' => {
                if q >= len {
                    return Err(Stop::Pattern(
                        "malformed pattern (ends with '%')".to_owned(),
                    ));
                }
                Ok(q + 1)
            }
            b'[' => {
                if self.pat.get(q) == Some(&b'^') {
                    q += 1;
                }
                loop {
                    if q >= len {
                        return Err(Stop::Pattern("malformed pattern (missing ']')".to_owned()));
                    }
                    let c = self.pat[q];
                    q += 1;
                    if c == b'%' && q < len {
                        q += 1;
                    }
                    if self.pat.get(q) == Some(&b']') {
                        return Ok(q + 1);
                    }
                }
            }
            _ => Ok(q),
        }
    }

    fn single(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.pat[p] {
            b'.' => true,
            b'%' => class(c, self.pat[p + 1]),
            b'[' => self.bracket(c, p, ep - 1),
            literal => literal == c,
        }
    }

    /// `matchbracketclass`: `p` is the `[`, `ec` the closing `]`.
    fn bracket(&self, c: u8, p: usize, ec: usize) -> bool {
        let pat = self.pat;
        let mut p = p;
        let mut sig = true;
        if pat[p + 1] == b'^' {
            sig = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !sig;
            }
            if pat[p] == b'%' {
                p += 1;
                if class(c, pat[p]) {
                    return sig;
                }
            } else if pat[p + 1] == b'-' && p + 2 < ec {
                p += 2;
                if pat[p - 2] <= c && c <= pat[p] {
                    return sig;
                }
            } else if pat[p] == c {
                return sig;
            }
        }
    }

    fn balance(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        if p + 1 >= self.pat.len() {
            return Err(Stop::Pattern(
                "malformed pattern (missing arguments to '%b')".to_owned(),
            ));
        }
        let (open, close) = (self.pat[p], self.pat[p + 1]);
        if self.src.get(s) != Some(&open) {
            return Ok(None);
        }
        let mut depth = 1usize;
        for (offset, &c) in self.src[s + 1..].iter().enumerate() {
            self.tick(1)?;
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(s + 1 + offset + 1));
                }
            } else if c == open {
                depth += 1;
            }
        }
        Ok(None)
    }

    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Step<Option<usize>> {
        let mut count = 0;
        while self.single(s + count, p, ep) {
            self.tick(1)?;
            count += 1;
        }
        loop {
            if let Some(end) = self.do_match(s + count, ep + 1)? {
                return Ok(Some(end));
            }
            if count == 0 {
                return Ok(None);
            }
            count -= 1;
        }
    }

    fn min_expand(&mut self, mut s: usize, p: usize, ep: usize) -> Step<Option<usize>> {
        loop {
            if let Some(end) = self.do_match(s, ep + 1)? {
                return Ok(Some(end));
            }
            if self.single(s, p, ep) {
                s += 1;
            } else {
                return Ok(None);
            }
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: CapLen) -> Step<Option<usize>> {
        if self.level >= MAX_CAPTURES {
            return Err(Stop::Pattern("too many captures".to_owned()));
        }
        self.caps[self.level] = (s, what);
        self.level += 1;
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.level -= 1;
        }
        Ok(result)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Step<Option<usize>> {
        let Some(open) = (0..self.level)
            .rev()
            .find(|&l| self.caps[l].1 == CapLen::Unfinished)
        else {
            return Err(Stop::Pattern("invalid pattern capture".to_owned()));
        };
        self.caps[open].1 = CapLen::Len(s - self.caps[open].0);
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.caps[open].1 = CapLen::Unfinished;
        }
        Ok(result)
    }

    fn match_capture(&mut self, s: usize, digit: u8) -> Step<Option<usize>> {
        let index = usize::from(digit - b'0');
        let invalid = || Stop::Pattern(format!("invalid capture index %{index}"));
        if index == 0 || index > self.level {
            return Err(invalid());
        }
        let (start, len) = self.caps[index - 1];
        let len = match len {
            CapLen::Unfinished => return Err(invalid()),
            CapLen::Position => return Ok(None),
            CapLen::Len(len) => len,
        };
        self.tick(1 + (len / 64) as u64)?;
        let matches =
            self.src.len() - s >= len && self.src[start..start + len] == self.src[s..s + len];
        Ok(matches.then_some(s + len))
    }

    /// Capture `i` of the last match `s..e` (the whole match when there are no captures).
    fn capture(&self, i: usize, s: usize, e: usize) -> Step<Capture> {
        if i >= self.level {
            if i != 0 {
                return Err(Stop::Pattern(format!("invalid capture index %{}", i + 1)));
            }
            return Ok(Capture::Text(s, e));
        }
        let (start, len) = self.caps[i];
        match len {
            CapLen::Unfinished => Err(Stop::Pattern("unfinished capture".to_owned())),
            CapLen::Position => Ok(Capture::Position(start + 1)),
            CapLen::Len(len) => Ok(Capture::Text(start, start + len)),
        }
    }

    /// Every capture of the last match; with `whole`, a pattern without captures yields
    /// the whole match.
    pub(crate) fn captures(&self, whole: Option<(usize, usize)>) -> Step<Vec<Capture>> {
        let count = if self.level == 0 && whole.is_some() {
            1
        } else {
            self.level
        };
        let (s, e) = whole.unwrap_or((0, 0));
        (0..count).map(|i| self.capture(i, s, e)).collect()
    }
}

/// `match_class` in the C locale.
fn class(c: u8, cl: u8) -> bool {
    let result = match cl.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t'..=b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return cl == c,
    };
    if cl.is_ascii_lowercase() {
        result
    } else {
        !result
    }
}

/// A plain substring search from `init`; charges roughly one step per 16 bytes scanned.
pub(crate) fn plain_find<M: Meter>(
    src: &[u8],
    pat: &[u8],
    init: usize,
    meter: &mut M,
) -> Result<Option<usize>, RunError> {
    if pat.is_empty() {
        return Ok(Some(init));
    }
    if pat.len() > src.len() - init {
        return Ok(None);
    }
    let last = src.len() - pat.len();
    let mut at = init;
    let mut steps = 0u64;
    let result = loop {
        let Some(offset) = src[at..=last].iter().position(|&b| b == pat[0]) else {
            steps += ((last + 1 - at) / 16) as u64;
            break None;
        };
        steps += (offset / 16) as u64 + 1 + (pat.len() / 16) as u64;
        at += offset;
        if src[at..at + pat.len()] == *pat {
            break Some(at);
        }
        at += 1;
        if at > last {
            break None;
        }
        if steps >= BATCH {
            meter.charge(std::mem::take(&mut steps))?;
        }
    };
    meter.charge(steps)?;
    Ok(result)
}

/// `posrelatI`: a 1-based, possibly negative start position clipped to `1..`.
fn start_position(pos: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    if pos > 0 {
        usize::try_from(pos).unwrap_or(usize::MAX)
    } else if pos == 0 || pos < -len_i {
        1
    } else {
        usize::try_from(len_i + pos + 1).unwrap_or(1)
    }
}

// ---- The Lua-facing functions ----

/// Charges pattern steps to a unit's instruction budget.
struct UnitMeter(Arc<Unit>);

impl Meter for UnitMeter {
    fn charge(&mut self, steps: u64) -> Result<(), RunError> {
        self.0.charge(steps)
    }
}

/// Installs the metered `find`, `match`, `gmatch` and `gsub` into the `string` table (which
/// is also the string metatable's `__index`, so method calls use them too).
pub(crate) fn install(lua: &Lua, unit: &Arc<Unit>) -> mlua::Result<()> {
    let string: Table = lua.globals().get("string")?;
    for find in [true, false] {
        let unit = Arc::clone(unit);
        let name = if find { "find" } else { "match" };
        string.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                find_aux(lua, &unit, &args, find, name)
            })?,
        )?;
    }
    let gmatch_unit = Arc::clone(unit);
    string.raw_set(
        "gmatch",
        lua.create_function(move |lua, args: MultiValue| gmatch(lua, &gmatch_unit, &args))?,
    )?;
    let gsub_unit = Arc::clone(unit);
    string.raw_set(
        "gsub",
        lua.create_function(move |lua, args: MultiValue| gsub(lua, &gsub_unit, &args))?,
    )?;
    Ok(())
}

fn lua_error(lua: &Lua, message: String) -> mlua::Error {
    raise(lua, RunError::new(RunErrorKind::Lua, message))
}

fn stop_error(lua: &Lua, unit: &Unit, stop: Stop, name: &str) -> mlua::Error {
    match stop {
        Stop::Pattern(message) => lua_error(lua, format!("string.{name}: {message}")),
        Stop::Meter(error) => mlua::Error::external(unit.dead().unwrap_or(error)),
    }
}

fn arg(args: &MultiValue, index: usize) -> Value {
    args.get(index).cloned().unwrap_or(Value::Nil)
}

fn string_arg(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    name: &str,
) -> mlua::Result<mlua::LuaString> {
    let value = arg(args, index);
    let type_name = value.type_name();
    if matches!(
        value,
        Value::String(_) | Value::Integer(_) | Value::Number(_)
    ) && let Some(text) = lua.coerce_string(value)?
    {
        return Ok(text);
    }
    Err(lua_error(
        lua,
        format!(
            "bad argument #{} to 'string.{name}' (string expected, got {type_name})",
            index + 1
        ),
    ))
}

fn int_arg(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    name: &str,
    default: i64,
) -> mlua::Result<i64> {
    let value = arg(args, index);
    if value.is_nil() {
        return Ok(default);
    }
    let type_name = value.type_name();
    let is_number = matches!(
        value,
        Value::Integer(_) | Value::Number(_) | Value::String(_)
    );
    match lua.coerce_integer(value)? {
        Some(integer) => Ok(integer),
        None => Err(lua_error(
            lua,
            if is_number {
                format!(
                    "bad argument #{} to 'string.{name}' (number has no integer representation)",
                    index + 1
                )
            } else {
                format!(
                    "bad argument #{} to 'string.{name}' (number expected, got {type_name})",
                    index + 1
                )
            },
        )),
    }
}

fn push_captures(lua: &Lua, src: &[u8], captures: &[Capture]) -> mlua::Result<Vec<Value>> {
    captures
        .iter()
        .map(|capture| match *capture {
            Capture::Text(start, end) => lua.create_string(&src[start..end]).map(Value::String),
            Capture::Position(position) => {
                Ok(Value::Integer(i64::try_from(position).unwrap_or(i64::MAX)))
            }
        })
        .collect()
}

fn index_value(n: usize) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

fn find_aux(
    lua: &Lua,
    unit: &Arc<Unit>,
    args: &MultiValue,
    find: bool,
    name: &str,
) -> mlua::Result<MultiValue> {
    let subject = string_arg(lua, args, 0, name)?;
    let pattern = string_arg(lua, args, 1, name)?;
    let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
    let init = start_position(int_arg(lua, args, 2, name, 1)?, src.len()) - 1;
    if init > src.len() {
        return Ok(MultiValue::from_iter([Value::Nil]));
    }
    let mut meter = UnitMeter(Arc::clone(unit));
    let plain = find
        && (arg(args, 3).as_boolean().unwrap_or(!arg(args, 3).is_nil())
            || !pat.iter().any(|b| SPECIALS.contains(b)));
    if plain {
        let found = plain_find(&src, &pat, init, &mut meter)
            .map_err(|e| stop_error(lua, unit, Stop::Meter(e), name))?;
        return Ok(match found {
            Some(at) => MultiValue::from_iter([index_value(at + 1), index_value(at + pat.len())]),
            None => MultiValue::from_iter([Value::Nil]),
        });
    }
    let anchor = pat.first() == Some(&b'^');
    let body = if anchor { &pat[1..] } else { &pat[..] };
    let mut matcher = Matcher::new(&src, body, &mut meter);
    let mut s1 = init;
    let found = loop {
        match matcher.try_at(s1) {
            Ok(Some(end)) => break Some((s1, end)),
            Ok(None) => {}
            Err(stop) => return Err(stop_error(lua, unit, stop, name)),
        }
        s1 += 1;
        if anchor || s1 > src.len() {
            break None;
        }
    };
    matcher
        .flush()
        .map_err(|stop| stop_error(lua, unit, stop, name))?;
    let Some((start, end)) = found else {
        return Ok(MultiValue::from_iter([Value::Nil]));
    };
    let mut out = Vec::new();
    if find {
        out.push(index_value(start + 1));
        out.push(index_value(end));
        let captures = matcher
            .captures(None)
            .map_err(|stop| stop_error(lua, unit, stop, name))?;
        out.extend(push_captures(lua, &src, &captures)?);
    } else {
        let captures = matcher
            .captures(Some((start, end)))
            .map_err(|stop| stop_error(lua, unit, stop, name))?;
        out.extend(push_captures(lua, &src, &captures)?);
    }
    Ok(MultiValue::from_iter(out))
}

/// The iteration state of one `gmatch` iterator.
struct GmatchState {
    next: usize,
    last_match: Option<usize>,
}

fn gmatch(lua: &Lua, unit: &Arc<Unit>, args: &MultiValue) -> mlua::Result<Function> {
    let subject = string_arg(lua, args, 0, "gmatch")?;
    let pattern = string_arg(lua, args, 1, "gmatch")?;
    let len = subject.as_bytes().len();
    let init = (start_position(int_arg(lua, args, 2, "gmatch", 1)?, len) - 1).min(len + 1);
    let state = Mutex::new(GmatchState {
        next: init,
        last_match: None,
    });
    let unit = Arc::clone(unit);
    lua.create_function(move |lua, ()| {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
        let mut meter = UnitMeter(Arc::clone(&unit));
        let mut matcher = Matcher::new(&src, &pat, &mut meter);
        let mut at = state.next;
        let mut found = None;
        while at <= src.len() {
            match matcher.try_at(at) {
                Ok(Some(end)) if Some(end) != state.last_match => {
                    found = Some((at, end));
                    break;
                }
                Ok(_) => at += 1,
                Err(stop) => return Err(stop_error(lua, &unit, stop, "gmatch")),
            }
        }
        matcher
            .flush()
            .map_err(|stop| stop_error(lua, &unit, stop, "gmatch"))?;
        let Some((start, end)) = found else {
            state.next = src.len() + 1;
            return Ok(MultiValue::new());
        };
        state.next = end;
        state.last_match = Some(end);
        let captures = matcher
            .captures(Some((start, end)))
            .map_err(|stop| stop_error(lua, &unit, stop, "gmatch"))?;
        Ok(MultiValue::from_iter(push_captures(lua, &src, &captures)?))
    })
}

/// The replacement argument of `gsub`.
enum Replacement {
    Text(Vec<u8>),
    Table(Table),
    Function(Function),
}

fn gsub(lua: &Lua, unit: &Arc<Unit>, args: &MultiValue) -> mlua::Result<MultiValue> {
    let subject = string_arg(lua, args, 0, "gsub")?;
    let pattern = string_arg(lua, args, 1, "gsub")?;
    let replacement = match arg(args, 2) {
        value @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            let text = lua.coerce_string(value)?.map(|s| s.as_bytes().to_vec());
            Replacement::Text(text.unwrap_or_default())
        }
        Value::Table(table) => Replacement::Table(table),
        Value::Function(function) => Replacement::Function(function),
        other => {
            return Err(lua_error(
                lua,
                format!(
                    "bad argument #3 to 'string.gsub' (string/function/table expected, got {})",
                    other.type_name()
                ),
            ));
        }
    };
    let (src, pat) = (subject.as_bytes(), pattern.as_bytes());
    let default_max = i64::try_from(src.len())
        .unwrap_or(i64::MAX)
        .saturating_add(1);
    let max = int_arg(lua, args, 3, "gsub", default_max)?;
    let anchor = pat.first() == Some(&b'^');
    let body = if anchor { &pat[1..] } else { &pat[..] };
    // The result is built outside Lua's allocator: keep it within what the VM could hold.
    let ceiling = unit.run.limits.lua_memory_bytes.get();
    let mut meter = UnitMeter(Arc::clone(unit));
    let mut matcher = Matcher::new(&src, body, &mut meter);
    let mut out: Vec<u8> = Vec::new();
    let mut at = 0usize;
    let mut last_match = None;
    let mut count: i64 = 0;
    let mut changed = false;
    while count < max {
        let found = matcher
            .try_at(at)
            .map_err(|stop| stop_error(lua, unit, stop, "gsub"))?;
        match found {
            Some(end) if Some(end) != last_match => {
                count += 1;
                changed |= add_value(lua, unit, &matcher, &replacement, &src, at, end, &mut out)?;
                at = end;
                last_match = Some(end);
            }
            _ if at < src.len() => {
                out.push(src[at]);
                at += 1;
            }
            _ => break,
        }
        if out.len() > ceiling {
            return Err(mlua::Error::external(RunError::new(
                RunErrorKind::Memory,
                format!(
                    "string.gsub's result grew past the Lua memory ceiling of {ceiling} bytes \
                     (RunLimits::lua_memory_bytes)"
                ),
            )));
        }
        if anchor {
            break;
        }
    }
    matcher
        .flush()
        .map_err(|stop| stop_error(lua, unit, stop, "gsub"))?;
    let result = if changed {
        out.extend_from_slice(&src[at..]);
        Value::String(lua.create_string(&out)?)
    } else {
        Value::String(subject.clone())
    };
    Ok(MultiValue::from_iter([result, Value::Integer(count)]))
}

/// Appends the replacement of match `s..e`; returns whether the subject changed.
#[allow(clippy::too_many_arguments)]
fn add_value<M: Meter>(
    lua: &Lua,
    unit: &Unit,
    matcher: &Matcher<'_, M>,
    replacement: &Replacement,
    src: &[u8],
    s: usize,
    e: usize,
    out: &mut Vec<u8>,
) -> mlua::Result<bool> {
    let stop = |stop: Stop| stop_error(lua, unit, stop, "gsub");
    let value = match replacement {
        Replacement::Text(text) => {
            let mut rest = &text[..];
            while let Some(at) = rest.iter().position(|&b| b == b'%') {
                out.extend_from_slice(&rest[..at]);
                match rest.get(at + 1).copied() {
                    Some(b'%') => out.push(b'%'),
                    Some(b'0') => out.extend_from_slice(&src[s..e]),
                    Some(digit @ b'1'..=b'9') => {
                        match matcher
                            .capture(usize::from(digit - b'1'), s, e)
                            .map_err(stop)?
                        {
                            Capture::Text(a, b) => out.extend_from_slice(&src[a..b]),
                            Capture::Position(p) => out.extend_from_slice(p.to_string().as_bytes()),
                        }
                    }
                    _ => {
                        return Err(lua_error(
                            lua,
                            "string.gsub: invalid use of '%' in replacement string".to_owned(),
                        ));
                    }
                }
                rest = rest.get(at + 2..).unwrap_or_default();
            }
            out.extend_from_slice(rest);
            return Ok(true);
        }
        Replacement::Table(table) => {
            let key = push_captures(lua, src, &[matcher.capture(0, s, e).map_err(stop)?])?;
            table.get::<Value>(key.into_iter().next().unwrap_or(Value::Nil))?
        }
        Replacement::Function(function) => {
            let captures = matcher.captures(Some((s, e))).map_err(stop)?;
            let args = push_captures(lua, src, &captures)?;
            function
                .call::<MultiValue>(MultiValue::from_iter(args))?
                .into_iter()
                .next()
                .unwrap_or(Value::Nil)
        }
    };
    match value {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(&src[s..e]);
            Ok(false)
        }
        value @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            if let Some(text) = lua.coerce_string(value)? {
                out.extend_from_slice(&text.as_bytes());
            }
            Ok(true)
        }
        other => Err(lua_error(
            lua,
            format!(
                "string.gsub: invalid replacement value (a {})",
                other.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Budget(u64);

    impl Meter for Budget {
        fn charge(&mut self, steps: u64) -> Result<(), RunError> {
            self.0 = self
                .0
                .checked_sub(steps)
                .ok_or_else(|| RunError::new(RunErrorKind::InstructionBudget, "out of steps"))?;
            Ok(())
        }
    }

    fn find(src: &str, pat: &str) -> Option<(usize, usize)> {
        let mut meter = Budget(u64::MAX);
        let mut m = Matcher::new(src.as_bytes(), pat.as_bytes(), &mut meter);
        (0..=src.len()).find_map(|s| m.try_at(s).ok().flatten().map(|e| (s, e)))
    }

    #[test]
    fn matches_like_lua() {
        assert_eq!(find("hello world", "o w"), Some((4, 7)));
        assert_eq!(find("key = value", "%w+"), Some((0, 3)));
        assert_eq!(find("f(a(b)c)d", "%b()"), Some((1, 8)));
        assert_eq!(find("THE (quick) fox", "%f[%a]%a+"), Some((0, 3)));
        assert_eq!(find("aXb", "[%u]"), Some((1, 2)));
        assert_eq!(find("abab", "(ab)%1"), Some((0, 4)));
        assert_eq!(find("x", "[^x]"), None);
    }

    #[test]
    fn a_catastrophic_pattern_runs_out_of_steps() {
        let src = "a".repeat(30);
        let pat = format!("{}b", "a*".repeat(30));
        let mut meter = Budget(1_000_000);
        let mut m = Matcher::new(src.as_bytes(), pat.as_bytes(), &mut meter);
        let stopped = (0..=src.len()).any(|s| matches!(m.try_at(s), Err(Stop::Meter(_))));
        assert!(stopped);
    }

    #[test]
    fn malformed_patterns_are_errors() {
        for pat in ["%", "[a", "(()", "%b", "%f", "%1"] {
            let mut meter = Budget(u64::MAX);
            let mut m = Matcher::new(b"abc", pat.as_bytes(), &mut meter);
            let result = m
                .try_at(0)
                .and_then(|_| m.captures(Some((0, 0))).map(|_| None::<usize>));
            assert!(matches!(result, Err(Stop::Pattern(_))), "{pat}");
        }
    }
}
