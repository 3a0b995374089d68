//! Parse-time Lua compilation.
//!
//! Every block must report the prompt file's absolute line numbers, in syntax errors now and
//! in runtime errors later. Blocks are first checked one by one (cheap, no padding); then
//! all of them are compiled in a single pass over one generated source that places each
//! block, wrapped in `function(...) … end`, on its own file lines. That keeps compilation
//! linear in the file's size, and each block is dumped as its own bytecode whose debug info
//! carries absolute lines under the chunk name `=origin`.

use std::ops::Range;
use std::sync::Arc;

use mlua::{Function, Lua, LuaOptions, StdLib, Table};

use super::error::{ParseError, ParseErrorKind};
use crate::prompt::LuaChunk;

struct Pending {
    code: String,
    line: usize,
}

/// The chunk name syntax errors are recompiled under: short, so Lua never cuts it.
const ERROR_CHUNK_NAME: &str = "=prompt";

pub(crate) struct Compiler {
    lua: Lua,
    chunk_name: String,
    origin: String,
    pending: Vec<Pending>,
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
            pending: Vec::new(),
        })
    }

    /// Checks `code` (whose first line is file line `line`) and queues it for compilation.
    pub(crate) fn compile(
        &mut self,
        code: &str,
        line: usize,
        span: Range<usize>,
    ) -> Result<LuaChunk, ParseError> {
        if let Err(error) = self
            .lua
            .load(code)
            .set_name(self.chunk_name.as_str())
            .into_function()
        {
            // The error path only: recompile with padding for the absolute line, under a
            // short name (Lua cuts chunk names longer than 60 bytes out of its messages).
            let padded = format!("{}{code}", "\n".repeat(line.saturating_sub(1)));
            let error = self
                .lua
                .load(padded)
                .set_name(ERROR_CHUNK_NAME)
                .into_function()
                .err()
                .unwrap_or(error);
            return Err(self.syntax_error(&error, line, span));
        }
        let index = self.pending.len();
        self.pending.push(Pending {
            code: code.to_owned(),
            line,
        });
        Ok(LuaChunk { index, line })
    }

    /// Compiles every queued block in one pass; returns their bytecode by index.
    pub(crate) fn finish(&self) -> Result<Vec<Arc<[u8]>>, ParseError> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        let internal = |error: mlua::Error| {
            ParseError::new(
                ParseErrorKind::LuaSyntax,
                format!("internal: compiling the prompt's Lua failed: {error}"),
            )
        };
        // Line 1 holds `return {`; each block's code starts on its own file line.
        let mut source = String::from("return {");
        let mut current_line = 1;
        for block in &self.pending {
            while current_line < block.line {
                source.push('\n');
                current_line += 1;
            }
            source.push_str("function(...) ");
            source.push_str(&block.code);
            current_line += block.code.matches('\n').count();
            source.push_str("\nend,");
            current_line += 1;
        }
        source.push_str("\n}");
        let table: Table = self
            .lua
            .load(source)
            .set_name(self.chunk_name.as_str())
            .call(())
            .map_err(internal)?;
        (1..=self.pending.len())
            .map(|i| {
                let function: Function = table.raw_get(i).map_err(internal)?;
                Ok(Arc::from(function.dump(false)))
            })
            .collect()
    }

    /// Compiles the per-VM prelude ([`crate::sandbox`]) once per prompt, so VM setup loads bytecode.
    pub(crate) fn compile_prelude(&self) -> Result<Arc<[u8]>, ParseError> {
        let function = self
            .lua
            .load(crate::sandbox::PRELUDE)
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
        // Lua reports `name:LINE: message`; keep the message and the absolute line.
        let rest = [&ERROR_CHUNK_NAME[1..], self.origin.as_str()]
            .iter()
            .find_map(|name| raw.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
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
