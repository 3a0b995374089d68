//! Parse-time Lua compilation.
//!
//! Each block is compiled with enough leading newlines that Lua's own line numbers are the
//! prompt file's absolute lines, under the chunk name `=origin`, so both syntax errors here
//! and runtime errors later read `origin:line: message`.

use std::ops::Range;
use std::sync::Arc;

use mlua::{Lua, LuaOptions, StdLib};

use super::error::{ParseError, ParseErrorKind};
use crate::prompt::LuaChunk;

pub(crate) struct Compiler {
    lua: Lua,
    chunk_name: String,
    origin: String,
    padding: String,
}

impl Compiler {
    pub(crate) fn new(origin: &str) -> Result<Self, ParseError> {
        let lua = Lua::new_with(StdLib::NONE, LuaOptions::new()).map_err(|error| {
            ParseError::new(
                ParseErrorKind::LuaSyntax,
                format!("could not start the Lua compiler: {error}"),
            )
        })?;
        Ok(Self {
            lua,
            chunk_name: format!("={origin}"),
            origin: origin.to_owned(),
            padding: String::new(),
        })
    }

    /// Compiles `code` whose first line is file line `line`.
    pub(crate) fn compile(
        &mut self,
        code: &str,
        line: usize,
        span: Range<usize>,
    ) -> Result<LuaChunk, ParseError> {
        let pad = line.saturating_sub(1);
        if self.padding.len() < pad {
            self.padding = "\n".repeat(pad);
        }
        let mut source = String::with_capacity(pad + code.len());
        source.push_str(&self.padding[..pad]);
        source.push_str(code);
        let function = self
            .lua
            .load(source)
            .set_name(self.chunk_name.as_str())
            .into_function()
            .map_err(|error| self.syntax_error(&error, line, span))?;
        Ok(LuaChunk {
            bytecode: Arc::from(function.dump(false)),
            line,
        })
    }

    /// Compiles the engine's per-VM prelude once per prompt, so VM setup loads bytecode.
    pub(crate) fn compile_prelude(&self) -> Result<Arc<[u8]>, ParseError> {
        let function = self
            .lua
            .load(crate::engine::PRELUDE)
            .set_name("=promptforge prelude")
            .into_function()
            .map_err(|e| {
                ParseError::new(ParseErrorKind::LuaSyntax, format!("internal prelude: {e}"))
            })?;
        Ok(Arc::from(function.dump(true)))
    }

    fn syntax_error(&self, error: &mlua::Error, line: usize, span: Range<usize>) -> ParseError {
        let raw = match error {
            mlua::Error::SyntaxError { message, .. } => message.clone(),
            other => other.to_string(),
        };
        // Lua reports `origin:LINE: message`; keep the message and the absolute line.
        let rest = raw
            .strip_prefix(self.origin.as_str())
            .and_then(|r| r.strip_prefix(':'))
            .unwrap_or(&raw);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (at, message) = match rest[..digits].parse::<usize>() {
            Ok(n) => (n, rest[digits..].trim_start_matches(':').trim()),
            Err(_) => (line, rest.trim()),
        };
        ParseError::new(
            ParseErrorKind::LuaSyntax,
            format!("Lua syntax error: {message}"),
        )
        .at(at, Some(span))
    }
}
