//! The text-format parser: tokens to a [`Module`], with located errors. Never panics;
//! nesting deeper than [`MAX_DEPTH`] is an error, so no input can overflow the stack.

use crate::diag::{Diagnostic, Errors};
use crate::konst::{parse_lane, Const};
use crate::lexer::{lex, Tok, TokKind};
use crate::opcode::{Opcode, Syntax};
use crate::program::{
    Imm, Loc, Module, Op, Output, ParamKind, Program, ProgramKind, Region, Value, ValueDef,
};
use crate::types::{Boundary, ScalarType, Type};
use std::collections::HashMap;

/// Deepest region nesting the parser accepts (the verifier's limit for built modules).
pub use crate::verify::MAX_DEPTH;

/// Parses a module. Errors: the syntax errors (see [`parse_module_partial`]), or every
/// undefined value.
/// (Duplicate program names are the verifier's to report.)
pub fn parse_module(src: &str) -> Result<Module, Errors> {
    match parse_module_partial(src)? {
        (m, errs) if errs.is_empty() => Ok(m),
        (_, errs) => Err(Errors(errs)),
    }
}

/// Parses and verifies a module, reporting every error found (undefined values, duplicate
/// programs and all verifier errors together), sorted by position.
pub fn parse_and_verify(src: &str) -> Result<Module, Errors> {
    let (m, mut errs) = parse_module_partial(src)?;
    if let Err(Errors(v)) = crate::verify::verify_module(&m) {
        // The parser already located uses of undefined values precisely.
        let had_undefined = !errs.is_empty();
        errs.extend(
            v.into_iter()
                .filter(|d| !(had_undefined && d.message.contains("undefined value"))),
        );
    }
    errs.sort_by_key(|d| match d.loc {
        Loc::Span(s, _) => s,
        _ => 0,
    });
    if errs.is_empty() {
        Ok(m)
    } else {
        Err(Errors(errs))
    }
}

/// Parses a module, returning it with the undefined-value errors found
/// (the module is complete apart from those). Errors: the syntax errors (after one, parsing
/// resumes at the next line of the program, or at the next `program`; at most 20).
pub fn parse_module_partial(src: &str) -> Result<(Module, Vec<Diagnostic>), Errors> {
    let toks = lex(src).map_err(|d| Errors(vec![d]))?;
    let mut p = Parser {
        src,
        toks,
        pos: 0,
        depth: 0,
        syntax: Vec::new(),
        fatal: false,
    };
    let mut m = Module::new();
    let mut errors = Vec::new();
    while p.peek().kind != TokKind::Eof && p.syntax.len() < MAX_SYNTAX_ERRORS {
        let mut ps = ProgState::default();
        let before = p.syntax.len();
        match p.program(&mut ps) {
            // Values an op with a syntax error would have defined are undefined: only the
            // syntax errors of such a program are reported.
            Ok(prog) if p.syntax.len() == before => {
                errors.extend(ps.undefined(&prog));
                m.programs.push(prog);
            }
            Ok(_) => {}
            Err(d) => {
                p.syntax.push(d);
                if p.fatal {
                    break;
                }
                p.skip_to_program();
            }
        }
    }
    if !p.syntax.is_empty() {
        return Err(Errors(p.syntax));
    }
    if m.programs.is_empty() {
        let t = p.peek();
        return Err(Errors(vec![Diagnostic::new(
            Loc::span(t.start..t.end),
            "expected `program`, found end of input (the file holds no program)",
        )]));
    }
    Ok((m, errors))
}

/// `" (did you mean `mul`?)"` for the mnemonic closest to `mn` (at most a third of its
/// letters edited; ties go to the longest common prefix), or nothing.
fn suggest_op(mn: &str) -> String {
    let best = crate::opcode::OP_TABLE
        .iter()
        .map(|i| {
            let prefix = mn
                .bytes()
                .zip(i.mnemonic.bytes())
                .take_while(|(a, b)| a == b);
            let d = strsim::damerau_levenshtein(mn, i.mnemonic);
            (d, std::cmp::Reverse(prefix.count()), i.mnemonic)
        })
        .min();
    match best {
        Some((d, _, m)) if d <= (mn.len() / 3).max(1) => format!(" (did you mean `{m}`?)"),
        _ => String::new(),
    }
}

/// Parses text holding exactly one program.
pub fn parse_program(src: &str) -> Result<Program, Errors> {
    let mut m = parse_module(src)?;
    match m.programs.len() {
        1 => Ok(m.programs.remove(0)),
        n => Err(Errors(vec![Diagnostic::new(
            Loc::span(0..src.len().min(1)),
            format!("expected exactly one program, found {n}"),
        )])),
    }
}

/// Syntax errors reported per parse at most (later ones are often echoes of earlier ones).
const MAX_SYNTAX_ERRORS: usize = 20;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    /// Syntax errors recovered from (an op skipped to the next line, a program skipped to
    /// the next `program`/`kernel`).
    syntax: Vec<Diagnostic>,
    /// Set by an error that ends parsing (end of input inside a region, regions nested too
    /// deeply): no recovery is tried after it.
    fatal: bool,
}

#[derive(Default)]
struct ProgState {
    names: HashMap<String, Value>,
    first_use: HashMap<Value, (usize, usize)>,
    defined: HashMap<Value, ()>,
}

impl ProgState {
    fn undefined(&self, p: &Program) -> Vec<Diagnostic> {
        let mut v: Vec<_> = self
            .first_use
            .iter()
            .filter(|(v, _)| !self.defined.contains_key(v))
            .map(|(v, &(s, e))| {
                let mut d = Diagnostic::new(
                    Loc::span(s..e),
                    format!(
                        "undefined value %{}",
                        p.value(*v).name.as_deref().unwrap_or("?")
                    ),
                );
                d.program = Some(p.name.clone());
                d
            })
            .collect();
        v.sort_by_key(|d| match d.loc {
            Loc::Span(s, _) => s,
            _ => 0,
        });
        v
    }
}

type PResult<T> = Result<T, Diagnostic>;

impl<'a> Parser<'a> {
    fn peek(&self) -> Tok {
        self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, k: usize) -> Tok {
        self.toks[(self.pos + k).min(self.toks.len() - 1)]
    }

    fn prev_end(&self) -> usize {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(0, |t| t.end)
    }

    fn next(&mut self) -> Tok {
        let t = self.peek();
        if t.kind != TokKind::Eof {
            self.pos += 1;
        }
        t
    }

    fn text(&self, t: Tok) -> &'a str {
        let s = &self.src[t.start..t.end];
        match t.kind {
            TokKind::ValueName | TokKind::ProgName => &s[1..],
            _ => s,
        }
    }

    fn describe(&self, t: Tok) -> String {
        match t.kind {
            TokKind::Eof => "end of input".into(),
            _ => format!("`{}`", &self.src[t.start..t.end]),
        }
    }

    /// Whether token `i` is the first of its line.
    fn starts_line(&self, i: usize) -> bool {
        i == 0
            || self
                .toks
                .get(i)
                .is_some_and(|t| self.src[self.toks[i - 1].end..t.start].contains('\n'))
    }

    /// After a syntax error in the op that starts at token `first`: skips from there to the
    /// first token of a later line outside the regions the op opens (or to the `}` closing
    /// the enclosing region), so that parsing resumes with the next op.
    fn skip_op(&mut self, first: usize) {
        self.pos = first;
        let mut depth = 0usize;
        loop {
            if self.peek().kind == TokKind::Eof {
                return;
            }
            if self.pos > first && depth == 0 && self.starts_line(self.pos) {
                return;
            }
            if self.is_punct(b'{') {
                depth += 1;
            } else if self.is_punct(b'}') {
                if depth == 0 {
                    return;
                }
                depth -= 1;
            }
            self.pos += 1;
        }
    }

    /// After a syntax error outside any op: skips to the next `program` or `kernel` that
    /// starts a line.
    fn skip_to_program(&mut self) {
        self.depth = 0;
        if self.peek().kind != TokKind::Eof {
            self.pos += 1;
        }
        while self.peek().kind != TokKind::Eof
            && !((self.is_word("program") || self.is_word("kernel")) && self.starts_line(self.pos))
        {
            self.pos += 1;
        }
    }

    fn err<T>(&self, t: Tok, msg: impl Into<String>) -> PResult<T> {
        Err(Diagnostic::new(
            Loc::span(t.start..t.end.max(t.start + 1)),
            msg,
        ))
    }

    fn expected<T>(&self, what: &str) -> PResult<T> {
        let t = self.peek();
        self.err(t, format!("expected {what}, found {}", self.describe(t)))
    }

    fn is_punct(&self, c: u8) -> bool {
        self.peek().kind == TokKind::Punct(c)
    }

    fn eat_punct(&mut self, c: u8) -> bool {
        if self.is_punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn punct(&mut self, c: u8) -> PResult<Tok> {
        if self.is_punct(c) {
            Ok(self.next())
        } else {
            self.expected(&format!("`{}`", c as char))
        }
    }

    fn is_word(&self, w: &str) -> bool {
        let t = self.peek();
        t.kind == TokKind::Word && self.text(t) == w
    }

    fn keyword(&mut self, w: &str) -> PResult<Tok> {
        if self.is_word(w) {
            Ok(self.next())
        } else {
            self.expected(&format!("`{w}`"))
        }
    }

    fn word(&mut self, what: &str) -> PResult<(Tok, &'a str)> {
        let t = self.peek();
        if t.kind == TokKind::Word {
            self.pos += 1;
            Ok((t, self.text(t)))
        } else {
            self.expected(what)
        }
    }

    fn small_int(&mut self, what: &str, max: u32) -> PResult<u32> {
        let t = self.peek();
        if t.kind == TokKind::Number {
            if let Ok(n) = self.text(t).parse::<u32>() {
                if n <= max {
                    self.pos += 1;
                    return Ok(n);
                }
            }
        }
        self.expected(what)
    }

    // ---- types and literals ----

    fn ty(&mut self) -> PResult<Type> {
        let t = self.peek();
        if self.eat_punct(b'<') {
            let n = self.small_int("a lane count (2, 3 or 4)", 4)?;
            self.keyword("x")?;
            let s = self.scalar()?;
            self.punct(b'>')?;
            if n < 2 {
                return self.err(t, "tuples have 2, 3 or 4 lanes");
            }
            return Ok(Type::tuple(s, n as u8).unwrap_or_else(|| Type::scalar(s)));
        }
        if self.is_word("array") {
            self.pos += 1;
            self.punct(b'<')?;
            let d = self.small_int("an array rank (1, 2 or 3)", 3)?;
            if d == 0 {
                return self.err(t, "arrays have 1, 2 or 3 axes");
            }
            self.keyword("x")?;
            // Checked before parsing the element, so nested array types never recurse.
            if self.is_word("array") {
                return self.err(t, "array elements must be scalars or tuples");
            }
            let elem = self.ty()?;
            let mut boundary = Boundary::Clamp;
            if self.eat_punct(b',') {
                let (bt, w) = self.word("a boundary mode (clamp, repeat, constant(...))")?;
                boundary = match w {
                    "clamp" => Boundary::Clamp,
                    "repeat" => Boundary::Repeat,
                    "constant" => {
                        self.punct(b'(')?;
                        let c = self.literal(elem)?;
                        self.punct(b')')?;
                        Boundary::Constant(c.lanes)
                    }
                    _ => return self.err(bt, format!("unknown boundary mode `{w}`")),
                };
            }
            self.punct(b'>')?;
            return Type::array(d as u8, elem, boundary)
                .map_or_else(|| self.err(t, "invalid array type"), Ok);
        }
        Ok(Type::scalar(self.scalar()?))
    }

    fn scalar(&mut self) -> PResult<ScalarType> {
        let t = self.peek();
        if t.kind == TokKind::Word {
            if let Some(s) = ScalarType::from_name(self.text(t)) {
                self.pos += 1;
                return Ok(s);
            }
        }
        self.expected("a type")
    }

    fn lane(&mut self, s: ScalarType) -> PResult<u64> {
        let start = self.peek();
        let neg = self.eat_punct(b'-');
        let t = self.peek();
        if !matches!(t.kind, TokKind::Number | TokKind::Word) {
            return self.expected(&format!("a {s} literal"));
        }
        self.pos += 1;
        let mut text = self.text(t).to_string();
        // `nan:0x7fc00001`
        if text == "nan" && self.is_punct(b':') && self.peek_at(1).kind == TokKind::Number {
            self.pos += 1;
            let t2 = self.next();
            text = format!("nan:{}", self.text(t2));
        }
        parse_lane(s, neg, &text)
            .map_err(|m| Diagnostic::new(Loc::span(start.start..self.prev_end()), m))
    }

    /// A literal of scalar or tuple type `ty`: `1.5` or `(1, 2, 3)`.
    fn literal(&mut self, ty: Type) -> PResult<Const> {
        let Some((s, n)) = ty.lanes() else {
            return self.expected("a scalar or tuple literal");
        };
        if n == 1 {
            return Ok(Const::scalar(s, self.lane(s)?));
        }
        let open = self.punct(b'(')?;
        let mut lanes = Vec::new();
        loop {
            lanes.push(self.lane(s)?);
            if !self.eat_punct(b',') {
                break;
            }
        }
        self.punct(b')')?;
        if lanes.len() != n as usize {
            return self.err(
                open,
                format!("a {ty} literal needs {n} lanes, got {}", lanes.len()),
            );
        }
        Ok(Const::from_lanes(ty, &lanes))
    }

    // ---- values ----

    fn use_value(&mut self, prog: &mut Program, ps: &mut ProgState) -> PResult<Value> {
        let t = self.peek();
        if t.kind != TokKind::ValueName {
            return self.expected("a value (`%name`)");
        }
        self.pos += 1;
        let name = self.text(t);
        let v = match ps.names.get(name) {
            Some(&v) => v,
            None => {
                let v = prog.new_value(Type::bool(), Some(name.to_string()), ValueDef::Undefined);
                ps.names.insert(name.to_string(), v);
                v
            }
        };
        ps.first_use.entry(v).or_insert((t.start, t.end));
        Ok(v)
    }

    fn value_list(&mut self, prog: &mut Program, ps: &mut ProgState) -> PResult<Vec<Value>> {
        let mut v = Vec::new();
        // `%x:` starts the next op's definition, not an operand of this one.
        if self.peek().kind != TokKind::ValueName || self.peek_at(1).kind == TokKind::Punct(b':') {
            return Ok(v);
        }
        loop {
            v.push(self.use_value(prog, ps)?);
            if !(self.is_punct(b',') && self.peek_at(1).kind == TokKind::ValueName) {
                return Ok(v);
            }
            self.pos += 1;
        }
    }

    /// Declares `%name` (the token just consumed) as a new value of type `ty`.
    fn define(
        &mut self,
        prog: &mut Program,
        ps: &mut ProgState,
        t: Tok,
        ty: Type,
        def: ValueDef,
    ) -> PResult<Value> {
        let name = self.text(t);
        let v = match ps.names.get(name) {
            Some(&v) if ps.defined.contains_key(&v) => {
                return self.err(t, format!("value %{name} is defined twice"));
            }
            Some(&v) => v,
            None => {
                let v = prog.new_value(ty, Some(name.to_string()), def);
                ps.names.insert(name.to_string(), v);
                v
            }
        };
        ps.defined.insert(v, ());
        let d = prog.value_mut(v);
        d.ty = ty;
        d.def = def;
        prog.set_value_loc(v, Loc::span(t.start..t.end));
        Ok(v)
    }

    /// `%name: type`, returning the name token and type.
    fn name_and_type(&mut self) -> PResult<(Tok, Type)> {
        let t = self.peek();
        if t.kind != TokKind::ValueName {
            return self.expected("a value name (`%name`)");
        }
        self.pos += 1;
        self.punct(b':')?;
        Ok((t, self.ty()?))
    }

    // ---- programs ----

    fn program(&mut self, ps: &mut ProgState) -> PResult<Program> {
        let kind = if self.is_word("kernel") {
            ProgramKind::Kernel
        } else {
            ProgramKind::Map
        };
        let kw = self.keyword(match kind {
            ProgramKind::Map => "program",
            ProgramKind::Kernel => "kernel",
        })?;
        let nt = self.peek();
        if nt.kind != TokKind::ProgName {
            return self.expected("a program name (`@name`)");
        }
        self.pos += 1;
        let mut prog = Program::new(self.text(nt));
        prog.kind = kind;
        prog.loc = Loc::span(kw.start..nt.end);
        self.punct(b'(')?;
        if !self.is_punct(b')') {
            loop {
                let uniform = self.is_word("uniform");
                let buffer = self.is_word("buffer");
                let kw = self.peek();
                if uniform || buffer {
                    self.pos += 1;
                }
                let (t, ty) = self.name_and_type()?;
                let kind = match (uniform, buffer, ty.is_array()) {
                    (true, _, true) => return self.err(t, "an array parameter cannot be uniform"),
                    (_, true, false) => {
                        return self.err(
                            t,
                            format!("a buffer parameter needs an array type, got {ty}"),
                        )
                    }
                    (_, true, true) if kind == ProgramKind::Map => {
                        return self.err(kw, "only kernels take `buffer` parameters")
                    }
                    (_, true, true) => ParamKind::Buffer,
                    (true, _, false) => ParamKind::Uniform,
                    (false, _, true) => ParamKind::Array,
                    (false, _, false) => ParamKind::Varying,
                };
                let idx = prog.params.len() as u32;
                let v = self.define(&mut prog, ps, t, ty, ValueDef::Param(idx))?;
                prog.params.push(crate::program::Param { kind, value: v });
                if !self.eat_punct(b',') {
                    break;
                }
            }
        }
        self.punct(b')')?;
        if kind == ProgramKind::Kernel {
            if self.peek().kind == TokKind::Arrow {
                return self.err(
                    self.peek(),
                    "a kernel has no outputs; it writes `buffer` parameters",
                );
            }
            let body = prog.body;
            self.block(&mut prog, ps, body, Opcode::Return)?;
            return Ok(prog);
        }
        if self.peek().kind != TokKind::Arrow {
            return self.expected("`->` and the output types");
        }
        self.pos += 1;
        self.punct(b'(')?;
        if !self.is_punct(b')') {
            loop {
                let t = self.peek();
                let name =
                    if t.kind == TokKind::Word && self.peek_at(1).kind == TokKind::Punct(b':') {
                        self.pos += 2;
                        Some(self.text(t).to_string())
                    } else {
                        None
                    };
                let ty = self.ty()?;
                prog.outputs.push(Output { name, ty });
                if !self.eat_punct(b',') {
                    break;
                }
            }
        }
        self.punct(b')')?;
        let body = prog.body;
        self.block(&mut prog, ps, body, Opcode::Return)?;
        Ok(prog)
    }

    /// `{ ops }` into region `r`; adds an empty terminator if the last op is not one.
    fn block(
        &mut self,
        prog: &mut Program,
        ps: &mut ProgState,
        r: Region,
        term: Opcode,
    ) -> PResult<()> {
        let open = self.punct(b'{')?;
        if self.depth >= MAX_DEPTH {
            self.fatal = true;
            return self.err(
                open,
                format!("regions nested deeper than {MAX_DEPTH} levels"),
            );
        }
        self.depth += 1;
        while !self.is_punct(b'}') {
            if self.peek().kind == TokKind::Eof {
                self.fatal = true;
                self.depth -= 1;
                return self.err(open, "unclosed `{`: expected `}` before end of input");
            }
            let first = self.pos;
            match self.op(prog, ps) {
                Ok(op) => prog.append(r, op),
                Err(d) if !self.fatal && self.syntax.len() + 1 < MAX_SYNTAX_ERRORS => {
                    // Recover: the op ends at the end of its line (ops are one per line in
                    // every printed module), or after the regions it opens.
                    self.syntax.push(d);
                    self.skip_op(first);
                }
                Err(d) => {
                    self.depth -= 1;
                    return Err(d);
                }
            }
        }
        self.pos += 1;
        self.depth -= 1;
        let last_is_term = prog
            .region(r)
            .ops
            .last()
            .is_some_and(|&o| prog.op(o).opcode.is_terminator());
        if !last_is_term {
            let op = prog.new_op(term, vec![], Imm::None, &[], vec![]);
            prog.set_op_loc(op, Loc::span(self.prev_end() - 1..self.prev_end()));
            prog.append(r, op);
        }
        Ok(())
    }

    fn op(&mut self, prog: &mut Program, ps: &mut ProgState) -> PResult<Op> {
        let start = self.peek().start;
        // Results: `%a: T, %b: U =`
        let mut results: Vec<(Tok, Type)> = Vec::new();
        if self.peek().kind == TokKind::ValueName {
            loop {
                results.push(self.name_and_type()?);
                if !self.eat_punct(b',') {
                    break;
                }
            }
            self.punct(b'=')?;
        }
        let (mt, mn) = self.word("an op mnemonic")?;
        let Some(opcode) = Opcode::from_mnemonic(mn) else {
            return self.err(mt, format!("unknown op `{mn}`{}", suggest_op(mn)));
        };
        let result_types: Vec<Type> = results.iter().map(|r| r.1).collect();
        let mut regions = Vec::new();
        let mut args = Vec::new();
        let mut imm = Imm::None;
        // Region arguments are defined before the results (they are inside).
        match opcode.info().syntax {
            Syntax::Const => {
                let Some(&ty) = result_types.first() else {
                    return self.err(mt, "`const` needs a typed result: `%c: f32 = const 1.0`");
                };
                if ty.is_array() {
                    return self.err(mt, "`const` cannot make an array");
                }
                imm = Imm::Const(self.literal(ty)?);
            }
            Syntax::Fixed(_) | Syntax::Variadic => args = self.value_list(prog, ps)?,
            Syntax::FixedLanes(_) => {
                args = self.value_list(prog, ps)?;
                self.punct(b',')?;
                self.punct(b'[')?;
                let mut lanes = Vec::new();
                loop {
                    lanes.push(self.small_int("a lane number (0 to 3)", 3)? as u8);
                    if !self.eat_punct(b',') {
                        break;
                    }
                }
                self.punct(b']')?;
                imm = Imm::Lanes(lanes);
            }
            Syntax::Call => {
                let t = self.peek();
                if t.kind != TokKind::ProgName {
                    return self.expected("a program name (`@name`)");
                }
                self.pos += 1;
                imm = Imm::Callee(self.text(t).to_string());
                self.punct(b'(')?;
                args = self.value_list(prog, ps)?;
                self.punct(b')')?;
            }
            Syntax::Control => {
                (args, regions) = self.control(prog, ps, opcode)?;
            }
        }
        let mut vals = Vec::new();
        for (i, (t, ty)) in results.iter().enumerate() {
            // The op index is the next one to be created.
            let op_index = Op(prog.num_ops() as u32);
            vals.push(self.define(prog, ps, *t, *ty, ValueDef::Result(op_index, i as u32))?);
        }
        let op = prog.new_op_with_results(opcode, args, imm, vals, regions);
        prog.set_op_loc(op, Loc::span(start..self.prev_end()));
        Ok(op)
    }

    /// `(%a: T = %init, ...)` (with inits) or `(%a: T, ...)`: defines region args.
    fn region_args(
        &mut self,
        prog: &mut Program,
        ps: &mut ProgState,
        r: Region,
        with_init: bool,
    ) -> PResult<Vec<Value>> {
        let mut inits = Vec::new();
        self.punct(b'(')?;
        if !self.is_punct(b')') {
            loop {
                let (t, ty) = self.name_and_type()?;
                let idx = prog.region(r).args.len() as u32;
                let v = self.define(prog, ps, t, ty, ValueDef::RegionArg(r, idx))?;
                prog.region_mut(r).args.push(v);
                if with_init {
                    self.punct(b'=')?;
                    inits.push(self.use_value(prog, ps)?);
                }
                if !self.eat_punct(b',') {
                    break;
                }
            }
        }
        self.punct(b')')?;
        Ok(inits)
    }

    fn control(
        &mut self,
        prog: &mut Program,
        ps: &mut ProgState,
        opcode: Opcode,
    ) -> PResult<(Vec<Value>, Vec<Region>)> {
        match opcode {
            Opcode::If => {
                let if_tok = self.toks[self.pos.saturating_sub(1)];
                let c = self.use_value(prog, ps)?;
                let (t, e) = (prog.new_region(), prog.new_region());
                self.block(prog, ps, t, Opcode::Yield)?;
                if self.is_word("else") {
                    self.pos += 1;
                    self.block(prog, ps, e, Opcode::Yield)?;
                } else {
                    let y = prog.new_op(Opcode::Yield, vec![], Imm::None, &[], vec![]);
                    prog.set_op_loc(y, Loc::span(if_tok.start..if_tok.end));
                    prog.append(e, y);
                }
                Ok((vec![c], vec![t, e]))
            }
            Opcode::For => {
                let r = prog.new_region();
                let (t, ty) = self.name_and_type()?;
                let iv = self.define(prog, ps, t, ty, ValueDef::RegionArg(r, 0))?;
                prog.region_mut(r).args.push(iv);
                self.punct(b'=')?;
                let lo = self.use_value(prog, ps)?;
                self.keyword("to")?;
                let hi = self.use_value(prog, ps)?;
                self.keyword("step")?;
                let step = self.use_value(prog, ps)?;
                let mut args = vec![lo, hi, step];
                if self.is_word("iter") {
                    self.pos += 1;
                    args.extend(self.region_args(prog, ps, r, true)?);
                }
                self.block(prog, ps, r, Opcode::Yield)?;
                Ok((args, vec![r]))
            }
            _ => {
                let (a, b) = (prog.new_region(), prog.new_region());
                self.keyword("iter")?;
                let inits = self.region_args(prog, ps, a, true)?;
                self.block(prog, ps, a, Opcode::Yield)?;
                self.keyword(if opcode == Opcode::While {
                    "do"
                } else {
                    "until"
                })?;
                self.region_args(prog, ps, b, false)?;
                self.block(prog, ps, b, Opcode::Yield)?;
                Ok((inits, vec![a, b]))
            }
        }
    }
}
