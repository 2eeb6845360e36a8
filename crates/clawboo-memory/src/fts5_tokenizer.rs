//! FTS5's `porter unicode61` tokenizer with its default options (`remove_diacritics=1`,
//! `categories 'L* N* Co'`, no `tokenchars` or `separators`), ported from SQLite's C
//! (`fts5_tokenize.c` and `fts5_unicode2.c`) so that text is tokenized without a round trip
//! through an FTS5 table.
//!
//! Why a port and not a crate: no crate reproduces FTS5's own tables (its categories, case
//! folding and diacritic removal come from an older Unicode) nor its stemmer's quirks, and
//! ranking must match SQLite's term for term. So every rule below follows the C code step by
//! step, the tables are generated from it, and the tests compare the two through real FTS5.

/// The longest term FTS5 indexes or queries, in bytes (`FTS5_MAX_TOKEN_SIZE`); longer
/// tokens are cut to it.
const MAX_TERM_BYTES: usize = 32768;

/// The porter stemmer leaves alone tokens shorter or longer than these, in bytes
/// (`nToken<3` and `FTS5_PORTER_MAX_TOKEN`).
const STEMMED_TOKEN_BYTES: std::ops::RangeInclusive<usize> = 3..=64;

/// Calls `emit(term, offset)` for each token FTS5's `porter unicode61` makes of `text`,
/// in order; `offset` is the token's 0-based index in `text` (what fts5vocab's `offset`
/// column reports).
pub(super) fn tokenize(text: &str, mut emit: impl FnMut(&str, usize)) {
    // One buffer for every token, folded into and then stemmed in place. Bytes rather than
    // a `String`: the stemmer works on bytes and, like the C code, may split a character.
    let mut token = Vec::new();
    let mut offset = 0;
    let mut in_token = false;
    for c in text.chars() {
        let code = read_code_point(c);
        // Diacritic marks do not start a token but do continue one.
        if is_token_char(code) || (in_token && is_diacritic(code)) {
            in_token = true;
            push_folded(&mut token, code);
        } else if in_token {
            in_token = false;
            emit_term(&mut token, offset, &mut emit);
            offset += 1;
        }
    }
    if in_token {
        emit_term(&mut token, offset, &mut emit);
    }
}

/// The code point unicode61 reads for `c`: its UTF-8 decoder (`FTS5_READ_UTF8`) turns the
/// noncharacters U+FFFE and U+FFFF into U+FFFD, a separator (the tables alone would make
/// them token characters, as they do every code point they do not cover).
fn read_code_point(c: char) -> u32 {
    match c {
        '\u{FFFE}' | '\u{FFFF}' => 0xFFFD,
        _ => u32::from(c),
    }
}

/// Appends `code`, case-folded and without its diacritic, to `token` (ASCII letters are
/// only lowercased, as unicode61's ASCII path does); marks the fold removes vanish.
fn push_folded(token: &mut Vec<u8>, code: u32) {
    if let Ok(byte) = u8::try_from(code)
        && byte.is_ascii()
    {
        token.push(byte.to_ascii_lowercase());
    } else if let Some(folded) = char::from_u32(fold(code)).filter(|&c| c != '\0') {
        token.extend_from_slice(folded.encode_utf8(&mut [0; 4]).as_bytes());
    }
}

/// Stems `token`, cuts it to the longest term FTS5 keeps, emits it, and empties the buffer.
fn emit_term(token: &mut Vec<u8>, offset: usize, emit: &mut impl FnMut(&str, usize)) {
    stem(token);
    token.truncate(MAX_TERM_BYTES);
    match std::str::from_utf8(token) {
        Ok(term) => emit(term, offset),
        // Only where SQLite's own term is not UTF-8 either (a cut or a stemmed-off byte
        // split a character): the term as a lossy reader of SQLite's text would see it.
        Err(_) => emit(&String::from_utf8_lossy(token), offset),
    }
    token.clear();
}

// ---- unicode61: which code points make tokens, and how they fold ----

/// `category`'s codes that make token characters under `categories 'L* N* Co'`: L* is
/// Ll 5, Lm 6, Lo 7, Lt 8, Lu 9 and LC 30, N* is Nd 13, Nl 14, No 15, and Co is 31. Code 0
/// (code points the tables do not cover) is in too, because SQLite's category parser
/// always sets it.
const TOKEN_CATEGORIES: u32 = 1
    | 1 << 5
    | 1 << 6
    | 1 << 7
    | 1 << 8
    | 1 << 9
    | 1 << 13
    | 1 << 14
    | 1 << 15
    | 1 << 30
    | 1 << 31;

const fn is_token_category(category: u16) -> bool {
    TOKEN_CATEGORIES & (1 << (category & 0x1F)) != 0
}

/// unicode61's ASCII fast path (`aTokenChar`), built the way `sqlite3Fts5UnicodeAscii`
/// builds it: from the category runs, in order; NUL is never a token character.
const ASCII_TOKEN_CHARS: [bool; 128] = {
    let mut table = [false; 128];
    let mut code = 0;
    let mut run = 0;
    while code < 128 {
        let is_token = is_token_category(CATEGORY_RUNS[run]);
        let end = code + (CATEGORY_RUNS[run] >> 5) as usize;
        while code < 128 && code < end {
            table[code] = is_token;
            code += 1;
        }
        run += 1;
    }
    table[0] = false;
    table
};

/// Whether `code` is a token character (`aTokenChar` for ASCII, `fts5UnicodeIsAlnum`
/// otherwise).
fn is_token_char(code: u32) -> bool {
    match usize::try_from(code) {
        Ok(ascii) if ascii < ASCII_TOKEN_CHARS.len() => ASCII_TOKEN_CHARS[ascii],
        _ => is_token_category(category(code)),
    }
}

/// `sqlite3Fts5UnicodeCategory`: `code`'s general category as FTS5's tables know it, coded
/// as in `TOKEN_CATEGORIES`; 0 for code points they do not cover.
fn category(code: u32) -> u16 {
    let Ok(plane @ 0..16) = usize::try_from(code >> 16) else {
        return 0;
    };
    let key = code & 0xFFFF;
    let first_run = usize::from(CATEGORY_PLANES[plane]);
    let plane_starts = &CATEGORY_RUN_STARTS[first_run..usize::from(CATEGORY_PLANES[plane + 1])];
    let Some(index) = plane_starts
        .partition_point(|&start| u32::from(start) <= key)
        .checked_sub(1)
    else {
        return 0;
    };
    let start = u32::from(plane_starts[index]);
    let run = CATEGORY_RUNS[first_run + index];
    if key >= start + u32::from(run >> 5) {
        return 0;
    }
    match run & 0x1F {
        // LC: upper and lower case letters in turn, upper first.
        30 if (key - start) & 1 == 1 => 5,
        30 => 9,
        category => category,
    }
}

/// `sqlite3Fts5UnicodeIsdiacritic`: whether `code` is one of the combining marks that
/// continue a token.
fn is_diacritic(code: u32) -> bool {
    match code {
        768..800 => DIACRITIC_MARKS_LOW >> (code - 768) & 1 == 1,
        800..=817 => DIACRITIC_MARKS_HIGH >> (code - 800) & 1 == 1,
        _ => false,
    }
}

/// `sqlite3Fts5UnicodeFold(code, 1)`: `code` lowercased and, below U+10000, without its
/// diacritic; 0 for marks that vanish.
fn fold(code: u32) -> u32 {
    if let Ok(byte) = u8::try_from(code)
        && byte.is_ascii()
    {
        return u32::from(byte.to_ascii_lowercase());
    }
    if code >= 0x10000 {
        // Only the Deseret capitals fold above the basic plane.
        return if (66560..66600).contains(&code) {
            code + 40
        } else {
            code
        };
    }
    let mut folded = code;
    let rule = FOLD_RULES
        .partition_point(|&(first, _, _)| u32::from(first) <= code)
        .checked_sub(1)
        .map(|index| FOLD_RULES[index]);
    if let Some((first, flags, length)) = rule {
        let first = u32::from(first);
        // Bit 0 of flags: only every second code point of the range folds.
        let every_second = flags & 1 == 1;
        if code < first + u32::from(length) && !(every_second && (first ^ code) & 1 == 1) {
            let offset = u32::from(FOLD_OFFSETS[usize::from(flags >> 1)]);
            folded = (code + offset) & 0xFFFF;
        }
    }
    remove_diacritic(folded)
}

/// `fts5_remove_diacritic(code, 0)`: the plain letter of a letter with a diacritic (0 for
/// a mark that vanishes), or `code`.
fn remove_diacritic(code: u32) -> u32 {
    let key = code << 3 | 7;
    let index = DIACRITIC_KEYS
        .partition_point(|&entry| u32::from(entry) <= key)
        .saturating_sub(1);
    let entry = u32::from(DIACRITIC_KEYS[index]);
    let applies = DIACRITIC_COMPLEX >> index & 1 == 0 && code <= (entry >> 3) + (entry & 7);
    if applies {
        u32::from(DIACRITIC_BASES[index])
    } else {
        code
    }
}

// ---- The porter stemmer (fts5PorterCb), on the token's bytes ----

/// Stems `word` in place as FTS5's porter tokenizer does. Only ASCII lowercase vowels count
/// as vowels; every other byte (including each byte of a non-ASCII character) is a
/// consonant.
fn stem(word: &mut Vec<u8>) {
    if !STEMMED_TOKEN_BYTES.contains(&word.len()) {
        return;
    }
    step_1a(word);
    if step_1b(word) && apply_first(word, &STEP_1B_LENGTHEN).is_none() {
        match word.as_slice() {
            // A double consonant loses one letter. (On a one-byte word the C code compares
            // with the byte before its buffer, part of a pointer: in practice never a letter.)
            [.., previous, last]
                if previous == last
                    && !is_vowel(*last, false)
                    && !matches!(last, b'l' | b's' | b'z') =>
            {
                word.pop();
            }
            _ if measure_is_1(word) && ends_cvc(word) => word.push(b'e'),
            _ => {}
        }
    }
    // Step 1c.
    if let [stem @ .., last @ b'y'] = word.as_mut_slice()
        && has_vowel(stem)
    {
        *last = b'i';
    }
    apply_first(word, &STEP_2);
    apply_first(word, &STEP_3);
    apply_first(word, &STEP_4);
    // Step 5a.
    if let [stem @ .., b'e'] = word.as_slice()
        && (measure_over_1(stem) || (measure_is_1(stem) && !ends_cvc(stem)))
    {
        word.pop();
    }
    // Step 5b.
    if let [stem @ .., b'l'] = word.as_slice()
        && stem.last() == Some(&b'l')
        && measure_over_1(stem)
    {
        word.pop();
    }
}

/// Step 1a: plural `s` endings.
fn step_1a(word: &mut Vec<u8>) {
    let length = word.len();
    match word.as_slice() {
        // `sses` and `ies` (only after at least one more byte) lose `es`.
        [_, .., b's', b's', b'e', b's'] | [_, .., b'i', b'e', b's'] => word.truncate(length - 2),
        [.., b's', b's'] => {}
        [.., b's'] => word.truncate(length - 1),
        _ => {}
    }
}

/// Step 1b: `eed`, `ed` and `ing`; true if `ed` or `ing` went (then `STEP_1B_LENGTHEN` and
/// the double consonant rules follow).
fn step_1b(word: &mut Vec<u8>) -> bool {
    // `eed` ends the step whether or not its condition holds.
    if word.len() > 3 && word.ends_with(b"eed") {
        apply_first(word, &STEP_1B_EED);
        return false;
    }
    apply_first(word, &STEP_1B_ED_ING) == Some(true)
}

/// A suffix rule: a word longer than `suffix` that ends with it has it replaced by
/// `replacement` if `condition` holds for the rest of the word.
struct Rule {
    suffix: &'static [u8],
    replacement: &'static [u8],
    condition: fn(&[u8]) -> bool,
}

const fn rule(
    suffix: &'static str,
    replacement: &'static str,
    condition: fn(&[u8]) -> bool,
) -> Rule {
    Rule {
        suffix: suffix.as_bytes(),
        replacement: replacement.as_bytes(),
        condition,
    }
}

/// Applies the first rule whose suffix `word` ends with, if its condition holds: `None` if
/// no suffix matched, else whether the rule applied. Later rules are not tried even when the
/// condition fails, as in the C code's `else if` chains.
fn apply_first(word: &mut Vec<u8>, rules: &[Rule]) -> Option<bool> {
    let rule = rules
        .iter()
        .find(|rule| word.len() > rule.suffix.len() && word.ends_with(rule.suffix))?;
    let stem_length = word.len() - rule.suffix.len();
    let applies = (rule.condition)(&word[..stem_length]);
    if applies {
        word.truncate(stem_length);
        word.extend_from_slice(rule.replacement);
    }
    Some(applies)
}

const STEP_1B_EED: [Rule; 1] = [rule("eed", "ee", measure_over_0)];

const STEP_1B_ED_ING: [Rule; 2] = [rule("ed", "", has_vowel), rule("ing", "", has_vowel)];

const STEP_1B_LENGTHEN: [Rule; 3] = [
    rule("at", "ate", always),
    rule("bl", "ble", always),
    rule("iz", "ize", always),
];

const STEP_2: [Rule; 21] = [
    rule("ational", "ate", measure_over_0),
    rule("tional", "tion", measure_over_0),
    rule("enci", "ence", measure_over_0),
    rule("anci", "ance", measure_over_0),
    rule("izer", "ize", measure_over_0),
    rule("logi", "log", measure_over_0),
    rule("bli", "ble", measure_over_0),
    rule("alli", "al", measure_over_0),
    rule("entli", "ent", measure_over_0),
    rule("eli", "e", measure_over_0),
    rule("ousli", "ous", measure_over_0),
    rule("ization", "ize", measure_over_0),
    rule("ation", "ate", measure_over_0),
    rule("ator", "ate", measure_over_0),
    rule("alism", "al", measure_over_0),
    rule("iveness", "ive", measure_over_0),
    rule("fulness", "ful", measure_over_0),
    rule("ousness", "ous", measure_over_0),
    rule("aliti", "al", measure_over_0),
    rule("iviti", "ive", measure_over_0),
    rule("biliti", "ble", measure_over_0),
];

const STEP_3: [Rule; 7] = [
    rule("ical", "ic", measure_over_0),
    rule("ness", "", measure_over_0),
    rule("icate", "ic", measure_over_0),
    rule("iciti", "ic", measure_over_0),
    rule("ful", "", measure_over_0),
    rule("ative", "", measure_over_0),
    rule("alize", "al", measure_over_0),
];

const STEP_4: [Rule; 19] = [
    rule("al", "", measure_over_1),
    rule("ance", "", measure_over_1),
    rule("ence", "", measure_over_1),
    rule("er", "", measure_over_1),
    rule("ic", "", measure_over_1),
    rule("able", "", measure_over_1),
    rule("ible", "", measure_over_1),
    rule("ant", "", measure_over_1),
    rule("ement", "", measure_over_1),
    rule("ment", "", measure_over_1),
    rule("ent", "", measure_over_1),
    rule("ion", "", measure_over_1_ending_s_or_t),
    rule("ou", "", measure_over_1),
    rule("ism", "", measure_over_1),
    rule("ate", "", measure_over_1),
    rule("iti", "", measure_over_1),
    rule("ous", "", measure_over_1),
    rule("ive", "", measure_over_1),
    rule("ize", "", measure_over_1),
];

fn is_vowel(byte: u8, y_is_vowel: bool) -> bool {
    matches!(byte, b'a' | b'e' | b'i' | b'o' | b'u') || (y_is_vowel && byte == b'y')
}

/// `fts5PorterGobbleVC`: the length of `stem` up to and including the first consonant after
/// its first vowel, or 0 if there is none. `after_consonant`: the byte before `stem` was a
/// consonant (so a leading `y` is a vowel).
fn gobble_vowels_then_consonant(stem: &[u8], after_consonant: bool) -> usize {
    let mut consonant = after_consonant;
    let mut seen_vowel = false;
    for (index, &byte) in stem.iter().enumerate() {
        consonant = !is_vowel(byte, consonant);
        if !seen_vowel {
            seen_vowel = !consonant;
        } else if consonant {
            return index + 1;
        }
    }
    0
}

/// Porter's m > 0.
fn measure_over_0(stem: &[u8]) -> bool {
    gobble_vowels_then_consonant(stem, false) != 0
}

/// Porter's m > 1.
fn measure_over_1(stem: &[u8]) -> bool {
    let first = gobble_vowels_then_consonant(stem, false);
    first != 0 && gobble_vowels_then_consonant(&stem[first..], true) != 0
}

/// Porter's m = 1.
fn measure_is_1(stem: &[u8]) -> bool {
    let first = gobble_vowels_then_consonant(stem, false);
    first != 0 && gobble_vowels_then_consonant(&stem[first..], true) == 0
}

/// Porter's m > 1 and (*S or *T).
fn measure_over_1_ending_s_or_t(stem: &[u8]) -> bool {
    matches!(stem.last(), Some(b's' | b't')) && measure_over_1(stem)
}

/// Porter's *v*, as FTS5 tests it: a `y` after the first byte counts as a vowel whatever
/// precedes it.
fn has_vowel(stem: &[u8]) -> bool {
    stem.iter()
        .enumerate()
        .any(|(index, &byte)| is_vowel(byte, index > 0))
}

/// Porter's *o: ends consonant, vowel, consonant, the last not `w`, `x` or `y`.
fn ends_cvc(stem: &[u8]) -> bool {
    if matches!(stem.last(), None | Some(b'w' | b'x' | b'y')) {
        return false;
    }
    let mut consonant = false;
    let mut last_three = 0u8;
    for &byte in stem {
        consonant = !is_vowel(byte, consonant);
        last_three = (last_three << 1 | u8::from(consonant)) & 0b111;
    }
    last_three == 0b101
}

fn always(_: &[u8]) -> bool {
    true
}

// ---- Tables generated from SQLite 3.54.1's fts5_unicode2.c (the amalgamation's copy)
// by a script that copies its arrays; do not edit by hand. ----

/// `fts5_remove_diacritic`'s `aDia`: each entry is a range's first code point `<< 3` plus
/// the range's length less one; the range's code points lose their diacritic.
const DIACRITIC_KEYS: [u16; 126] = [
    0, 1797, 1848, 1859, 1891, 1928, 1940, 1995, 2024, 2040, 2060, 2110, 2168, 2206, 2264, 2286,
    2344, 2383, 2472, 2488, 2516, 2596, 2668, 2732, 2782, 2842, 2894, 2954, 2984, 3000, 3028, 3336,
    3456, 3696, 3712, 3728, 3744, 3766, 3832, 3896, 3912, 3928, 3944, 3968, 4008, 4040, 4056, 4106,
    4138, 4170, 4202, 4234, 4266, 4296, 4312, 4344, 4408, 4424, 4442, 4472, 4488, 4504, 6148, 6198,
    6264, 6280, 6360, 6429, 6505, 6529, 61448, 61468, 61512, 61534, 61592, 61610, 61642, 61672,
    61688, 61704, 61726, 61784, 61800, 61816, 61836, 61880, 61896, 61914, 61948, 61998, 62062,
    62122, 62154, 62184, 62200, 62218, 62252, 62302, 62364, 62410, 62442, 62478, 62536, 62554,
    62584, 62604, 62640, 62648, 62656, 62664, 62730, 62766, 62830, 62890, 62924, 62974, 63032,
    63050, 63082, 63118, 63182, 63242, 63274, 63310, 63368, 63390,
];

/// `fts5_remove_diacritic`'s `aChar`: the letter each `DIACRITIC_KEYS` range folds to (0 for
/// marks that vanish).
const DIACRITIC_BASES: &[u8; 126] = b"\0aceinouyyacdeeghijklnorstuuwyzouaiouuagkoojgnaa\
    eiorusthaeoooy\0\0\0\0\0\0\0\0abcddeeefghhiiklllmnoprrrs\
    stuuvwwxyzhtwyaaaaeeeioooouuuy";

/// Bit `i` set: `DIACRITIC_BASES[i]` applies only with `remove_diacritics=2` (the C table's
/// `HIBIT`), which `porter unicode61` does not use.
const DIACRITIC_COMPLEX: u128 = 0x1b9b8009244829001400446000000000;

/// `sqlite3Fts5UnicodeFold`'s `aEntry`: (first code point, flags, range length). Bit 0 of
/// flags: only every second code point folds; flags `>> 1`: index into `FOLD_OFFSETS`.
const FOLD_RULES: [(u16, u8, u8); 163] = [
    (65, 14, 26),
    (181, 64, 1),
    (192, 14, 23),
    (216, 14, 7),
    (256, 1, 48),
    (306, 1, 6),
    (313, 1, 16),
    (330, 1, 46),
    (376, 116, 1),
    (377, 1, 6),
    (383, 104, 1),
    (385, 50, 1),
    (386, 1, 4),
    (390, 44, 1),
    (391, 0, 1),
    (393, 42, 2),
    (395, 0, 1),
    (398, 32, 1),
    (399, 38, 1),
    (400, 40, 1),
    (401, 0, 1),
    (403, 42, 1),
    (404, 46, 1),
    (406, 52, 1),
    (407, 48, 1),
    (408, 0, 1),
    (412, 52, 1),
    (413, 54, 1),
    (415, 56, 1),
    (416, 1, 6),
    (422, 60, 1),
    (423, 0, 1),
    (425, 60, 1),
    (428, 0, 1),
    (430, 60, 1),
    (431, 0, 1),
    (433, 58, 2),
    (435, 1, 4),
    (439, 62, 1),
    (440, 0, 1),
    (444, 0, 1),
    (452, 2, 1),
    (453, 0, 1),
    (455, 2, 1),
    (456, 0, 1),
    (458, 2, 1),
    (459, 1, 18),
    (478, 1, 18),
    (497, 2, 1),
    (498, 1, 4),
    (502, 122, 1),
    (503, 134, 1),
    (504, 1, 40),
    (544, 110, 1),
    (546, 1, 18),
    (570, 70, 1),
    (571, 0, 1),
    (573, 108, 1),
    (574, 68, 1),
    (577, 0, 1),
    (579, 106, 1),
    (580, 28, 1),
    (581, 30, 1),
    (582, 1, 10),
    (837, 36, 1),
    (880, 1, 4),
    (886, 0, 1),
    (902, 18, 1),
    (904, 16, 3),
    (908, 26, 1),
    (910, 24, 2),
    (913, 14, 17),
    (931, 14, 9),
    (962, 0, 1),
    (975, 4, 1),
    (976, 140, 1),
    (977, 142, 1),
    (981, 146, 1),
    (982, 144, 1),
    (984, 1, 24),
    (1008, 136, 1),
    (1009, 138, 1),
    (1012, 130, 1),
    (1013, 128, 1),
    (1015, 0, 1),
    (1017, 152, 1),
    (1018, 0, 1),
    (1021, 110, 3),
    (1024, 34, 16),
    (1040, 14, 32),
    (1120, 1, 34),
    (1162, 1, 54),
    (1216, 6, 1),
    (1217, 1, 14),
    (1232, 1, 88),
    (1329, 22, 38),
    (4256, 66, 38),
    (4295, 66, 1),
    (4301, 66, 1),
    (7680, 1, 150),
    (7835, 132, 1),
    (7838, 96, 1),
    (7840, 1, 96),
    (7944, 150, 8),
    (7960, 150, 6),
    (7976, 150, 8),
    (7992, 150, 8),
    (8008, 150, 6),
    (8025, 151, 8),
    (8040, 150, 8),
    (8072, 150, 8),
    (8088, 150, 8),
    (8104, 150, 8),
    (8120, 150, 2),
    (8122, 126, 2),
    (8124, 148, 1),
    (8126, 100, 1),
    (8136, 124, 4),
    (8140, 148, 1),
    (8152, 150, 2),
    (8154, 120, 2),
    (8168, 150, 2),
    (8170, 118, 2),
    (8172, 152, 1),
    (8184, 112, 2),
    (8186, 114, 2),
    (8188, 148, 1),
    (8486, 98, 1),
    (8490, 92, 1),
    (8491, 94, 1),
    (8498, 12, 1),
    (8544, 8, 16),
    (8579, 0, 1),
    (9398, 10, 26),
    (11264, 22, 47),
    (11360, 0, 1),
    (11362, 88, 1),
    (11363, 102, 1),
    (11364, 90, 1),
    (11367, 1, 6),
    (11373, 84, 1),
    (11374, 86, 1),
    (11375, 80, 1),
    (11376, 82, 1),
    (11378, 0, 1),
    (11381, 0, 1),
    (11390, 78, 2),
    (11392, 1, 100),
    (11499, 1, 4),
    (11506, 0, 1),
    (42560, 1, 46),
    (42624, 1, 24),
    (42786, 1, 14),
    (42802, 1, 62),
    (42873, 1, 4),
    (42877, 76, 1),
    (42878, 1, 10),
    (42891, 0, 1),
    (42893, 74, 1),
    (42896, 1, 4),
    (42912, 1, 10),
    (42922, 72, 1),
    (65313, 14, 26),
];

/// `sqlite3Fts5UnicodeFold`'s `aiOff`: what a folding code point adds (mod 2^16).
const FOLD_OFFSETS: [u16; 77] = [
    1, 2, 8, 15, 16, 26, 28, 32, 37, 38, 40, 48, 63, 64, 69, 71, 79, 80, 116, 202, 203, 205, 206,
    207, 209, 210, 211, 213, 214, 217, 218, 219, 775, 7264, 10792, 10795, 23228, 23256, 30204,
    54721, 54753, 54754, 54756, 54787, 54793, 54809, 57153, 57274, 57921, 58019, 58363, 61722,
    65268, 65341, 65373, 65406, 65408, 65410, 65415, 65424, 65436, 65439, 65450, 65462, 65472,
    65476, 65478, 65480, 65482, 65488, 65506, 65511, 65514, 65521, 65527, 65528, 65529,
];

/// `aFts5UnicodeBlock`: where each plane's runs start in `CATEGORY_RUN_STARTS` (and one
/// past the last plane's).
const CATEGORY_PLANES: [u16; 17] = [
    0, 1471, 1753, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1760, 1763,
    1765,
];

/// `aFts5UnicodeMap`: each run's first code point, low 16 bits, ascending within a plane.
const CATEGORY_RUN_STARTS: [u16; 1765] = [
    0, 32, 33, 36, 37, 40, 41, 42, 43, 44, 45, 46, 48, 58, 60, 63, 65, 91, 92, 93, 94, 95, 96, 97,
    123, 124, 125, 126, 127, 160, 161, 162, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176,
    177, 178, 180, 181, 182, 184, 185, 186, 187, 188, 191, 192, 215, 216, 223, 247, 248, 256, 312,
    313, 329, 330, 377, 383, 385, 387, 388, 391, 394, 396, 398, 402, 403, 405, 406, 409, 412, 414,
    415, 417, 418, 423, 427, 428, 431, 434, 436, 437, 440, 442, 443, 444, 446, 448, 452, 453, 454,
    455, 456, 457, 458, 459, 460, 461, 477, 478, 496, 497, 498, 499, 500, 503, 505, 506, 564, 570,
    572, 573, 575, 577, 580, 583, 584, 592, 660, 661, 688, 706, 710, 722, 736, 741, 748, 749, 750,
    751, 768, 880, 884, 885, 886, 890, 891, 894, 900, 902, 903, 904, 908, 910, 912, 913, 931, 940,
    975, 977, 978, 981, 984, 1008, 1012, 1014, 1015, 1018, 1020, 1021, 1072, 1120, 1154, 1155,
    1160, 1162, 1217, 1231, 1232, 1329, 1369, 1370, 1377, 1417, 1418, 1423, 1425, 1470, 1471, 1472,
    1473, 1475, 1476, 1478, 1479, 1488, 1520, 1523, 1536, 1542, 1545, 1547, 1548, 1550, 1552, 1563,
    1566, 1568, 1600, 1601, 1611, 1632, 1642, 1646, 1648, 1649, 1748, 1749, 1750, 1757, 1758, 1759,
    1765, 1767, 1769, 1770, 1774, 1776, 1786, 1789, 1791, 1792, 1807, 1808, 1809, 1810, 1840, 1869,
    1958, 1969, 1984, 1994, 2027, 2036, 2038, 2039, 2042, 2048, 2070, 2074, 2075, 2084, 2085, 2088,
    2089, 2096, 2112, 2137, 2142, 2208, 2210, 2276, 2304, 2307, 2308, 2362, 2363, 2364, 2365, 2366,
    2369, 2377, 2381, 2382, 2384, 2385, 2392, 2402, 2404, 2406, 2416, 2417, 2418, 2425, 2433, 2434,
    2437, 2447, 2451, 2474, 2482, 2486, 2492, 2493, 2494, 2497, 2503, 2507, 2509, 2510, 2519, 2524,
    2527, 2530, 2534, 2544, 2546, 2548, 2554, 2555, 2561, 2563, 2565, 2575, 2579, 2602, 2610, 2613,
    2616, 2620, 2622, 2625, 2631, 2635, 2641, 2649, 2654, 2662, 2672, 2674, 2677, 2689, 2691, 2693,
    2703, 2707, 2730, 2738, 2741, 2748, 2749, 2750, 2753, 2759, 2761, 2763, 2765, 2768, 2784, 2786,
    2790, 2800, 2801, 2817, 2818, 2821, 2831, 2835, 2858, 2866, 2869, 2876, 2877, 2878, 2879, 2880,
    2881, 2887, 2891, 2893, 2902, 2903, 2908, 2911, 2914, 2918, 2928, 2929, 2930, 2946, 2947, 2949,
    2958, 2962, 2969, 2972, 2974, 2979, 2984, 2990, 3006, 3008, 3009, 3014, 3018, 3021, 3024, 3031,
    3046, 3056, 3059, 3065, 3066, 3073, 3077, 3086, 3090, 3114, 3125, 3133, 3134, 3137, 3142, 3146,
    3157, 3160, 3168, 3170, 3174, 3192, 3199, 3202, 3205, 3214, 3218, 3242, 3253, 3260, 3261, 3262,
    3263, 3264, 3270, 3271, 3274, 3276, 3285, 3294, 3296, 3298, 3302, 3313, 3330, 3333, 3342, 3346,
    3389, 3390, 3393, 3398, 3402, 3405, 3406, 3415, 3424, 3426, 3430, 3440, 3449, 3450, 3458, 3461,
    3482, 3507, 3517, 3520, 3530, 3535, 3538, 3542, 3544, 3570, 3572, 3585, 3633, 3634, 3636, 3647,
    3648, 3654, 3655, 3663, 3664, 3674, 3713, 3716, 3719, 3722, 3725, 3732, 3737, 3745, 3749, 3751,
    3754, 3757, 3761, 3762, 3764, 3771, 3773, 3776, 3782, 3784, 3792, 3804, 3840, 3841, 3844, 3859,
    3860, 3861, 3864, 3866, 3872, 3882, 3892, 3893, 3894, 3895, 3896, 3897, 3898, 3899, 3900, 3901,
    3902, 3904, 3913, 3953, 3967, 3968, 3973, 3974, 3976, 3981, 3993, 4030, 4038, 4039, 4046, 4048,
    4053, 4057, 4096, 4139, 4141, 4145, 4146, 4152, 4153, 4155, 4157, 4159, 4160, 4170, 4176, 4182,
    4184, 4186, 4190, 4193, 4194, 4197, 4199, 4206, 4209, 4213, 4226, 4227, 4229, 4231, 4237, 4238,
    4239, 4240, 4250, 4253, 4254, 4256, 4295, 4301, 4304, 4347, 4348, 4349, 4682, 4688, 4696, 4698,
    4704, 4746, 4752, 4786, 4792, 4800, 4802, 4808, 4824, 4882, 4888, 4957, 4960, 4969, 4992, 5008,
    5024, 5120, 5121, 5741, 5743, 5760, 5761, 5787, 5788, 5792, 5867, 5870, 5888, 5902, 5906, 5920,
    5938, 5941, 5952, 5970, 5984, 5998, 6002, 6016, 6068, 6070, 6071, 6078, 6086, 6087, 6089, 6100,
    6103, 6104, 6107, 6108, 6109, 6112, 6128, 6144, 6150, 6151, 6155, 6158, 6160, 6176, 6211, 6212,
    6272, 6313, 6314, 6320, 6400, 6432, 6435, 6439, 6441, 6448, 6450, 6451, 6457, 6464, 6468, 6470,
    6480, 6512, 6528, 6576, 6593, 6600, 6608, 6618, 6622, 6656, 6679, 6681, 6686, 6688, 6741, 6742,
    6743, 6744, 6752, 6753, 6754, 6755, 6757, 6765, 6771, 6783, 6784, 6800, 6816, 6823, 6824, 6912,
    6916, 6917, 6964, 6965, 6966, 6971, 6972, 6973, 6978, 6979, 6981, 6992, 7002, 7009, 7019, 7028,
    7040, 7042, 7043, 7073, 7074, 7078, 7080, 7082, 7083, 7084, 7086, 7088, 7098, 7142, 7143, 7144,
    7146, 7149, 7150, 7151, 7154, 7164, 7168, 7204, 7212, 7220, 7222, 7227, 7232, 7245, 7248, 7258,
    7288, 7294, 7360, 7376, 7379, 7380, 7393, 7394, 7401, 7405, 7406, 7410, 7412, 7413, 7424, 7468,
    7531, 7544, 7545, 7579, 7616, 7676, 7680, 7830, 7838, 7936, 7944, 7952, 7960, 7968, 7976, 7984,
    7992, 8000, 8008, 8016, 8025, 8027, 8029, 8031, 8033, 8040, 8048, 8064, 8072, 8080, 8088, 8096,
    8104, 8112, 8118, 8120, 8124, 8125, 8126, 8127, 8130, 8134, 8136, 8140, 8141, 8144, 8150, 8152,
    8157, 8160, 8168, 8173, 8178, 8182, 8184, 8188, 8189, 8192, 8203, 8208, 8214, 8216, 8217, 8218,
    8219, 8221, 8222, 8223, 8224, 8232, 8233, 8234, 8239, 8240, 8249, 8250, 8251, 8255, 8257, 8260,
    8261, 8262, 8263, 8274, 8275, 8276, 8277, 8287, 8288, 8298, 8304, 8305, 8308, 8314, 8317, 8318,
    8319, 8320, 8330, 8333, 8334, 8336, 8352, 8400, 8413, 8417, 8418, 8421, 8448, 8450, 8451, 8455,
    8456, 8458, 8459, 8462, 8464, 8467, 8468, 8469, 8470, 8472, 8473, 8478, 8484, 8485, 8486, 8487,
    8488, 8489, 8490, 8494, 8495, 8496, 8500, 8501, 8505, 8506, 8508, 8510, 8512, 8517, 8519, 8522,
    8523, 8524, 8526, 8527, 8528, 8544, 8579, 8581, 8585, 8592, 8597, 8602, 8604, 8608, 8609, 8611,
    8612, 8614, 8615, 8622, 8623, 8654, 8656, 8658, 8659, 8660, 8661, 8692, 8960, 8968, 8972, 8992,
    8994, 9001, 9002, 9003, 9084, 9085, 9115, 9140, 9180, 9186, 9216, 9280, 9312, 9372, 9450, 9472,
    9655, 9656, 9665, 9666, 9720, 9728, 9839, 9840, 9985, 10088, 10089, 10090, 10091, 10092, 10093,
    10094, 10095, 10096, 10097, 10098, 10099, 10100, 10101, 10102, 10132, 10176, 10181, 10182,
    10183, 10214, 10215, 10216, 10217, 10218, 10219, 10220, 10221, 10222, 10223, 10224, 10240,
    10496, 10627, 10628, 10629, 10630, 10631, 10632, 10633, 10634, 10635, 10636, 10637, 10638,
    10639, 10640, 10641, 10642, 10643, 10644, 10645, 10646, 10647, 10648, 10649, 10712, 10713,
    10714, 10715, 10716, 10748, 10749, 10750, 11008, 11056, 11077, 11079, 11088, 11264, 11312,
    11360, 11363, 11365, 11367, 11374, 11377, 11378, 11380, 11381, 11383, 11388, 11390, 11393,
    11394, 11492, 11493, 11499, 11503, 11506, 11513, 11517, 11518, 11520, 11559, 11565, 11568,
    11631, 11632, 11647, 11648, 11680, 11688, 11696, 11704, 11712, 11720, 11728, 11736, 11744,
    11776, 11778, 11779, 11780, 11781, 11782, 11785, 11786, 11787, 11788, 11789, 11790, 11799,
    11800, 11802, 11803, 11804, 11805, 11806, 11808, 11809, 11810, 11811, 11812, 11813, 11814,
    11815, 11816, 11817, 11818, 11823, 11824, 11834, 11904, 11931, 12032, 12272, 12288, 12289,
    12292, 12293, 12294, 12295, 12296, 12297, 12298, 12299, 12300, 12301, 12302, 12303, 12304,
    12305, 12306, 12308, 12309, 12310, 12311, 12312, 12313, 12314, 12315, 12316, 12317, 12318,
    12320, 12321, 12330, 12334, 12336, 12337, 12342, 12344, 12347, 12348, 12349, 12350, 12353,
    12441, 12443, 12445, 12447, 12448, 12449, 12539, 12540, 12543, 12549, 12593, 12688, 12690,
    12694, 12704, 12736, 12784, 12800, 12832, 12842, 12872, 12880, 12881, 12896, 12928, 12938,
    12977, 12992, 13056, 13312, 19893, 19904, 19968, 40908, 40960, 40981, 40982, 42128, 42192,
    42232, 42238, 42240, 42508, 42509, 42512, 42528, 42538, 42560, 42606, 42607, 42608, 42611,
    42612, 42622, 42623, 42624, 42655, 42656, 42726, 42736, 42738, 42752, 42775, 42784, 42786,
    42800, 42802, 42864, 42865, 42873, 42878, 42888, 42889, 42891, 42896, 42912, 43000, 43002,
    43003, 43010, 43011, 43014, 43015, 43019, 43020, 43043, 43045, 43047, 43048, 43056, 43062,
    43064, 43065, 43072, 43124, 43136, 43138, 43188, 43204, 43214, 43216, 43232, 43250, 43256,
    43259, 43264, 43274, 43302, 43310, 43312, 43335, 43346, 43359, 43360, 43392, 43395, 43396,
    43443, 43444, 43446, 43450, 43452, 43453, 43457, 43471, 43472, 43486, 43520, 43561, 43567,
    43569, 43571, 43573, 43584, 43587, 43588, 43596, 43597, 43600, 43612, 43616, 43632, 43633,
    43639, 43642, 43643, 43648, 43696, 43697, 43698, 43701, 43703, 43705, 43710, 43712, 43713,
    43714, 43739, 43741, 43742, 43744, 43755, 43756, 43758, 43760, 43762, 43763, 43765, 43766,
    43777, 43785, 43793, 43808, 43816, 43968, 44003, 44005, 44006, 44008, 44009, 44011, 44012,
    44013, 44016, 44032, 55203, 55216, 55243, 55296, 56191, 56319, 57343, 57344, 63743, 63744,
    64112, 64256, 64275, 64285, 64286, 64287, 64297, 64298, 64312, 64318, 64320, 64323, 64326,
    64434, 64467, 64830, 64831, 64848, 64914, 65008, 65020, 65021, 65024, 65040, 65047, 65048,
    65049, 65056, 65072, 65073, 65075, 65077, 65078, 65079, 65080, 65081, 65082, 65083, 65084,
    65085, 65086, 65087, 65088, 65089, 65090, 65091, 65092, 65093, 65095, 65096, 65097, 65101,
    65104, 65108, 65112, 65113, 65114, 65115, 65116, 65117, 65118, 65119, 65122, 65123, 65124,
    65128, 65129, 65130, 65136, 65142, 65279, 65281, 65284, 65285, 65288, 65289, 65290, 65291,
    65292, 65293, 65294, 65296, 65306, 65308, 65311, 65313, 65339, 65340, 65341, 65342, 65343,
    65344, 65345, 65371, 65372, 65373, 65374, 65375, 65376, 65377, 65378, 65379, 65380, 65382,
    65392, 65393, 65438, 65440, 65474, 65482, 65490, 65498, 65504, 65506, 65507, 65508, 65509,
    65512, 65513, 65517, 65529, 65532, 0, 13, 40, 60, 63, 80, 128, 256, 263, 311, 320, 373, 377,
    394, 400, 464, 509, 640, 672, 768, 800, 816, 833, 834, 842, 896, 927, 928, 968, 976, 977, 1024,
    1064, 1104, 1184, 2048, 2056, 2058, 2103, 2108, 2111, 2135, 2136, 2304, 2326, 2335, 2336, 2367,
    2432, 2494, 2560, 2561, 2565, 2572, 2576, 2581, 2585, 2616, 2623, 2624, 2640, 2656, 2685, 2687,
    2816, 2873, 2880, 2904, 2912, 2936, 3072, 3680, 4096, 4097, 4098, 4099, 4152, 4167, 4178, 4198,
    4224, 4226, 4227, 4272, 4275, 4279, 4281, 4283, 4285, 4286, 4304, 4336, 4352, 4355, 4391, 4396,
    4397, 4406, 4416, 4480, 4482, 4483, 4531, 4534, 4543, 4545, 4549, 4560, 5760, 5803, 5804, 5805,
    5806, 5808, 5814, 5815, 5824, 8192, 9216, 9328, 12288, 26624, 28416, 28496, 28497, 28559,
    28563, 45056, 53248, 53504, 53545, 53605, 53607, 53610, 53613, 53619, 53627, 53635, 53637,
    53644, 53674, 53678, 53760, 53826, 53829, 54016, 54112, 54272, 54298, 54324, 54350, 54358,
    54376, 54402, 54428, 54430, 54434, 54437, 54441, 54446, 54454, 54459, 54461, 54469, 54480,
    54506, 54532, 54535, 54541, 54550, 54558, 54584, 54587, 54592, 54598, 54602, 54610, 54636,
    54662, 54688, 54714, 54740, 54766, 54792, 54818, 54844, 54870, 54896, 54922, 54952, 54977,
    54978, 55003, 55004, 55010, 55035, 55036, 55061, 55062, 55068, 55093, 55094, 55119, 55120,
    55126, 55151, 55152, 55177, 55178, 55184, 55209, 55210, 55235, 55236, 55242, 55246, 60928,
    60933, 60961, 60964, 60967, 60969, 60980, 60985, 60987, 60994, 60999, 61001, 61003, 61005,
    61009, 61012, 61015, 61017, 61019, 61021, 61023, 61025, 61028, 61031, 61036, 61044, 61049,
    61054, 61056, 61067, 61089, 61093, 61099, 61168, 61440, 61488, 61600, 61617, 61633, 61649,
    61696, 61712, 61744, 61808, 61926, 61968, 62016, 62032, 62208, 62256, 62263, 62336, 62368,
    62406, 62432, 62464, 62528, 62530, 62713, 62720, 62784, 62800, 62971, 63045, 63104, 63232, 0,
    42710, 42752, 46900, 46912, 47133, 63488, 1, 32, 256, 0, 65533,
];

/// `aFts5UnicodeData`: each run's length `<< 5` plus its category (`category`'s codes).
const CATEGORY_RUNS: [u16; 1765] = [
    1025, 61, 117, 55, 117, 54, 50, 53, 57, 53, 49, 85, 333, 85, 121, 85, 841, 54, 53, 50, 56, 48,
    56, 837, 54, 57, 50, 57, 1057, 61, 53, 151, 58, 53, 56, 58, 39, 52, 57, 34, 58, 56, 58, 57, 79,
    56, 37, 85, 56, 47, 39, 51, 111, 53, 745, 57, 233, 773, 57, 261, 1822, 37, 542, 37, 1534, 222,
    69, 73, 37, 126, 126, 73, 69, 137, 37, 73, 37, 105, 101, 73, 37, 73, 37, 190, 158, 37, 126,
    126, 73, 37, 126, 94, 37, 39, 94, 69, 135, 41, 40, 37, 41, 40, 37, 41, 40, 37, 542, 37, 606,
    37, 41, 40, 37, 126, 73, 37, 1886, 197, 73, 37, 73, 69, 126, 105, 37, 286, 2181, 39, 869, 582,
    152, 390, 472, 166, 248, 38, 56, 38, 568, 3596, 158, 38, 56, 94, 38, 101, 53, 88, 41, 53, 105,
    41, 73, 37, 553, 297, 1125, 94, 37, 105, 101, 798, 133, 94, 57, 126, 94, 37, 1641, 1541, 1118,
    58, 172, 75, 1790, 478, 37, 2846, 1225, 38, 213, 1253, 53, 49, 55, 1452, 49, 44, 53, 76, 53,
    76, 53, 44, 871, 103, 85, 162, 121, 85, 55, 85, 90, 364, 53, 85, 1031, 38, 327, 684, 333, 149,
    71, 44, 3175, 53, 39, 236, 34, 58, 204, 70, 76, 58, 140, 71, 333, 103, 90, 39, 469, 34, 39, 44,
    967, 876, 2855, 364, 39, 333, 1063, 300, 70, 58, 117, 38, 711, 140, 38, 300, 38, 108, 38, 172,
    501, 807, 108, 53, 39, 359, 876, 108, 42, 1735, 44, 42, 44, 39, 106, 268, 138, 44, 74, 39, 236,
    327, 76, 85, 333, 53, 38, 199, 231, 44, 74, 263, 71, 711, 231, 39, 135, 44, 39, 106, 140, 74,
    74, 44, 39, 42, 71, 103, 76, 333, 71, 87, 207, 58, 55, 76, 42, 199, 71, 711, 231, 71, 71, 71,
    44, 106, 76, 76, 108, 44, 135, 39, 333, 76, 103, 44, 76, 42, 295, 103, 711, 231, 71, 167, 44,
    39, 106, 172, 76, 42, 74, 44, 39, 71, 76, 333, 53, 55, 44, 74, 263, 71, 711, 231, 71, 167, 44,
    39, 42, 44, 42, 140, 74, 74, 44, 44, 42, 71, 103, 76, 333, 58, 39, 207, 44, 39, 199, 103, 135,
    71, 39, 71, 71, 103, 391, 74, 44, 74, 106, 106, 44, 39, 42, 333, 111, 218, 55, 58, 106, 263,
    103, 743, 327, 167, 39, 108, 138, 108, 140, 76, 71, 71, 76, 333, 239, 58, 74, 263, 103, 743,
    327, 167, 44, 39, 42, 44, 170, 44, 74, 74, 76, 74, 39, 71, 76, 333, 71, 74, 263, 103, 1319, 39,
    106, 140, 106, 106, 44, 39, 42, 71, 76, 333, 207, 58, 199, 74, 583, 775, 295, 39, 231, 44, 106,
    108, 44, 266, 74, 53, 1543, 44, 71, 236, 55, 199, 38, 268, 53, 333, 85, 71, 39, 71, 39, 39,
    135, 231, 103, 39, 39, 71, 135, 44, 71, 204, 76, 39, 167, 38, 204, 333, 135, 39, 122, 501, 58,
    53, 122, 76, 218, 333, 335, 58, 44, 58, 44, 58, 44, 54, 50, 54, 50, 74, 263, 1159, 460, 42,
    172, 53, 76, 167, 364, 1164, 282, 44, 218, 90, 181, 154, 85, 1383, 74, 140, 42, 204, 42, 76,
    74, 76, 39, 333, 213, 199, 74, 76, 135, 108, 39, 106, 71, 234, 103, 140, 423, 44, 74, 76, 202,
    44, 39, 42, 333, 106, 44, 90, 1225, 41, 41, 1383, 53, 38, 10631, 135, 231, 39, 135, 1319, 135,
    1063, 135, 231, 39, 135, 487, 1831, 135, 2151, 108, 309, 655, 519, 346, 2727, 49, 19847, 85,
    551, 61, 839, 54, 50, 2407, 117, 110, 423, 135, 108, 583, 108, 85, 583, 76, 423, 103, 76, 1671,
    76, 42, 236, 266, 44, 74, 364, 117, 38, 117, 55, 39, 44, 333, 335, 213, 49, 149, 108, 61, 333,
    1127, 38, 1671, 1319, 44, 39, 2247, 935, 108, 138, 76, 106, 74, 44, 202, 108, 58, 85, 333, 967,
    167, 1415, 554, 231, 74, 333, 47, 1114, 743, 76, 106, 85, 1703, 42, 44, 42, 236, 44, 42, 44,
    74, 268, 202, 332, 44, 333, 333, 245, 38, 213, 140, 42, 1511, 44, 42, 172, 42, 44, 170, 44, 74,
    231, 333, 245, 346, 300, 314, 76, 42, 967, 42, 140, 74, 76, 42, 44, 74, 71, 333, 1415, 44, 42,
    76, 106, 44, 42, 108, 74, 149, 1159, 266, 268, 74, 76, 181, 333, 103, 333, 967, 198, 85, 277,
    108, 53, 428, 42, 236, 135, 44, 135, 74, 44, 71, 1413, 2022, 421, 38, 1093, 1190, 1260, 140,
    4830, 261, 3166, 261, 265, 197, 201, 261, 265, 261, 265, 197, 201, 261, 41, 41, 41, 94, 229,
    265, 453, 261, 264, 261, 264, 261, 264, 165, 69, 137, 40, 56, 37, 120, 101, 69, 137, 40, 120,
    133, 69, 137, 120, 261, 169, 120, 101, 69, 137, 40, 88, 381, 162, 209, 85, 52, 51, 54, 84, 51,
    54, 52, 277, 59, 60, 162, 61, 309, 52, 51, 149, 80, 117, 57, 54, 50, 373, 57, 53, 48, 341, 61,
    162, 194, 47, 38, 207, 121, 54, 50, 38, 335, 121, 54, 50, 422, 855, 428, 139, 44, 107, 396, 90,
    41, 154, 41, 90, 37, 105, 69, 105, 37, 58, 41, 90, 57, 169, 218, 41, 58, 41, 58, 41, 58, 137,
    58, 37, 137, 37, 135, 37, 90, 69, 73, 185, 94, 101, 58, 57, 90, 37, 58, 527, 1134, 94, 142, 47,
    185, 186, 89, 154, 57, 90, 57, 90, 57, 250, 57, 1018, 89, 90, 57, 58, 57, 1018, 8601, 282, 153,
    666, 89, 250, 54, 50, 2618, 57, 986, 825, 1306, 217, 602, 1274, 378, 1935, 2522, 719, 5882, 57,
    314, 57, 1754, 281, 3578, 57, 4634, 3322, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54,
    50, 975, 1434, 185, 54, 50, 1017, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 537, 8218, 4217, 54,
    50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 2041, 54,
    50, 54, 50, 1049, 54, 50, 8281, 1562, 697, 90, 217, 346, 1513, 1509, 126, 73, 69, 254, 105, 37,
    94, 37, 94, 165, 70, 105, 37, 3166, 37, 218, 158, 108, 94, 149, 47, 85, 1221, 37, 37, 1799, 38,
    53, 44, 743, 231, 231, 231, 231, 231, 231, 231, 231, 1036, 85, 52, 51, 52, 51, 117, 52, 51, 53,
    52, 51, 309, 49, 85, 49, 53, 52, 51, 85, 52, 51, 54, 50, 54, 50, 54, 50, 54, 50, 181, 38, 341,
    81, 858, 2874, 6874, 410, 61, 117, 58, 38, 39, 46, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 90,
    54, 50, 54, 50, 54, 50, 54, 50, 49, 54, 82, 58, 302, 140, 74, 49, 166, 90, 110, 38, 39, 53, 90,
    2759, 76, 88, 70, 39, 49, 2887, 53, 102, 39, 1319, 3015, 90, 143, 346, 871, 1178, 519, 1018,
    335, 986, 271, 58, 495, 1050, 335, 1274, 495, 2042, 8218, 39, 39, 2074, 39, 39, 679, 38, 36583,
    1786, 1287, 198, 85, 8583, 38, 117, 519, 333, 71, 1502, 39, 44, 107, 53, 332, 53, 38, 798, 44,
    2247, 334, 76, 213, 760, 294, 88, 478, 69, 2014, 38, 261, 190, 350, 38, 88, 158, 158, 382, 70,
    37, 231, 44, 103, 44, 135, 44, 743, 74, 76, 42, 154, 207, 90, 55, 58, 1671, 149, 74, 1607, 522,
    44, 85, 333, 588, 199, 117, 39, 333, 903, 268, 85, 743, 364, 74, 53, 935, 108, 42, 1511, 44,
    74, 140, 74, 44, 138, 437, 38, 333, 85, 1319, 204, 74, 76, 74, 76, 103, 44, 263, 44, 42, 333,
    149, 519, 38, 199, 122, 39, 42, 1543, 44, 39, 108, 71, 76, 167, 76, 39, 44, 39, 71, 38, 85,
    359, 42, 76, 74, 85, 39, 70, 42, 44, 199, 199, 199, 231, 231, 1127, 74, 44, 74, 44, 74, 53, 42,
    44, 333, 39, 39, 743, 1575, 36, 68, 68, 36, 63, 63, 11719, 3399, 229, 165, 39, 44, 327, 57,
    423, 167, 39, 71, 71, 3463, 536, 11623, 54, 50, 2055, 1735, 391, 55, 58, 524, 245, 54, 50, 53,
    236, 53, 81, 80, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 54, 50, 85, 54, 50,
    149, 112, 117, 149, 49, 54, 50, 54, 50, 54, 50, 117, 57, 49, 121, 53, 55, 85, 167, 4327, 34,
    117, 55, 117, 54, 50, 53, 57, 53, 49, 85, 333, 85, 121, 85, 841, 54, 53, 50, 56, 48, 56, 837,
    54, 57, 50, 57, 54, 50, 53, 54, 50, 85, 327, 38, 1447, 70, 999, 199, 199, 199, 103, 87, 57, 56,
    58, 87, 58, 153, 90, 98, 90, 391, 839, 615, 71, 487, 455, 3943, 117, 1455, 314, 1710, 143, 570,
    47, 410, 1466, 44, 935, 1575, 999, 143, 551, 46, 263, 46, 967, 53, 1159, 263, 53, 174, 1289,
    1285, 2503, 333, 199, 39, 1415, 71, 39, 743, 53, 271, 711, 207, 53, 839, 53, 1799, 71, 39, 108,
    76, 140, 135, 103, 871, 108, 44, 271, 309, 935, 79, 53, 1735, 245, 711, 271, 615, 271, 2343,
    1007, 42, 44, 42, 1703, 492, 245, 655, 333, 76, 42, 1447, 106, 140, 74, 76, 85, 34, 149, 807,
    333, 108, 1159, 172, 42, 268, 333, 149, 76, 42, 1543, 106, 300, 74, 135, 149, 333, 1383, 44,
    42, 44, 74, 204, 42, 44, 333, 28135, 3182, 149, 34279, 18215, 2215, 39, 1482, 140, 422, 71,
    7898, 1274, 1946, 74, 108, 122, 202, 258, 268, 90, 236, 986, 140, 1562, 2138, 108, 58, 2810,
    591, 841, 837, 841, 229, 581, 841, 837, 41, 73, 41, 73, 137, 265, 133, 37, 229, 357, 841, 837,
    73, 137, 265, 233, 837, 73, 137, 169, 41, 233, 837, 841, 837, 841, 837, 841, 837, 841, 837,
    841, 837, 841, 901, 809, 57, 805, 57, 197, 809, 57, 805, 57, 197, 809, 57, 805, 57, 197, 809,
    57, 805, 57, 197, 809, 57, 805, 57, 197, 94, 1613, 135, 871, 71, 39, 39, 327, 135, 39, 39, 39,
    39, 39, 39, 103, 71, 39, 39, 39, 39, 39, 39, 71, 39, 135, 231, 135, 135, 39, 327, 551, 103,
    167, 551, 89, 1434, 3226, 506, 474, 506, 506, 367, 1018, 1946, 1402, 954, 1402, 314, 90, 1082,
    218, 2266, 666, 1210, 186, 570, 2042, 58, 5850, 154, 2010, 154, 794, 2266, 378, 2266, 3738, 39,
    39, 39, 39, 39, 39, 17351, 34, 3074, 7692, 63, 63,
];

/// `sqlite3Fts5UnicodeIsdiacritic`'s `mask0`: bit `i` set if U+0300 + `i` is a diacritic.
const DIACRITIC_MARKS_LOW: u32 = 0x08029FDF;

/// `sqlite3Fts5UnicodeIsdiacritic`'s `mask1`: bit `i` set if U+0320 + `i` is a diacritic.
const DIACRITIC_MARKS_HIGH: u32 = 0x000361F8;

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// Real FTS5 with the same tokenizer: text goes in as a row of a contentless table and
    /// comes back as terms through an `fts5vocab` instance table.
    struct Fts5(Connection);

    impl Fts5 {
        fn open() -> Fts5 {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch(
                "CREATE VIRTUAL TABLE t USING fts5(x, content='', tokenize='porter unicode61');
                 CREATE VIRTUAL TABLE v USING fts5vocab(t, instance);",
            )
            .unwrap();
            Fts5(conn)
        }

        fn tokens(&self, text: &str) -> Vec<(String, usize)> {
            let conn = &self.0;
            conn.prepare_cached("INSERT INTO t(rowid, x) VALUES (1, ?1)")
                .unwrap()
                .execute([text])
                .unwrap();
            let mut select = conn
                .prepare_cached("SELECT term, offset FROM v ORDER BY offset")
                .unwrap();
            let mut tokens = Vec::new();
            let mut rows = select.query([]).unwrap();
            while let Some(row) = rows.next().unwrap() {
                // Bytes, not `String`: a few of FTS5's terms are not UTF-8.
                let term = String::from_utf8_lossy(row.get_ref(0).unwrap().as_bytes().unwrap());
                let offset: i64 = row.get(1).unwrap();
                tokens.push((term.into_owned(), usize::try_from(offset).unwrap()));
            }
            conn.execute("INSERT INTO t(t) VALUES ('delete-all')", [])
                .unwrap();
            tokens
        }

        /// Asserts that `tokenize` makes exactly FTS5's tokens of `text`; returns how many.
        fn check(&self, text: &str) -> usize {
            let expected = self.tokens(text);
            let mut actual = Vec::new();
            tokenize(text, |term, offset| actual.push((term.to_owned(), offset)));
            if actual != expected {
                let at = actual
                    .iter()
                    .zip(&expected)
                    .position(|(a, e)| a != e)
                    .unwrap_or(actual.len().min(expected.len()));
                let window = at.saturating_sub(2)..at + 3;
                let shown = |tokens: &[(String, usize)]| {
                    tokens[window.start.min(tokens.len())..window.end.min(tokens.len())].to_vec()
                };
                let excerpt: String = text.chars().take(200).collect();
                panic!(
                    "token {at} of {excerpt:?} ({} chars): \
                     ours {:?}, FTS5's {:?} ({} vs {} tokens)",
                    text.chars().count(),
                    shown(&actual),
                    shown(&expected),
                    actual.len(),
                    expected.len(),
                );
            }
            expected.len()
        }
    }

    /// Words exercising every porter rule, its conditions, and the stemmer's quirks.
    const ENGLISH: &str = "
        caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated
        troubled sized hopping tanned falling hissing fizzed failing filing happy sky
        relational conditional rational valenci hesitanci digitizer conformabli radicalli
        differentli vileli analogousli vietnamization predication operator feudalism
        decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate
        formative formalize electriciti electrical hopeful goodness revival allowance
        inference airliner gyroscopic adjustable defensible irritant replacement adjustment
        dependent adoption homologou communism activate angulariti homologous effective
        bowdlerize probate rate cease controll roll generalizations oscillators
        generalization generalize general generous generously abatement abated abating
        abbreviation abilities ability archaeology archeological logi logical theologian
        theology apology bleed speed proceed exceed succeed need seed weed reed disagreed
        pieces cries dies lies skies says boys toys yes yeti syzygy yell sly shy boyish
        playing played plays stayed stays betrayed crying spying enjoyed conditionally
        conditioned fulfilling fulfilment nationalism nationalities rationalization
        rationalize rationally hopelessness carelessness usefulness helpfulness tasteful
        traditional additional anticipation anticipatory sensational sensationalism
        inflationary dictionary vacancy vacancies emergency emergencies fluency flaccidity
        enormity enormous disturbance conference preference reference preferable terrible
        responsible capable cable table fable able idle lying dying tying eying hing ing
        ed sed bed fed red wed ted led zed ness less cess fulness ousness iveness ization
        ation ator alism aliti iviti biliti ical icate iciti ative alize ance ence er ic
        able ible ant ement ment ent sion tion ion ou ism ate iti ous ive ize agreement
        element cement lament moment segment fragmentation attention suspension explosion
        adhesion coercion opinion onion union scion lion million pension tension mention
        dimension apprehension condescension precision revision vision fission mission
        emission admission probe hope hoped hoping file filed fail failed failure hopped
        hissed buzzing buzzed fall fell filling filled spelling spell well dull controlling
        controlled rolling fixed fixing boxed boxing mixed snowed snowing showed taxed fly
        flying flies rely relied relying deny denied denying annoy annoying annoyance tabled
        bubbled related debated prized sses ies ss s is as us yes eyes aye bye dye
        ye yy yyy yyyy ys yed ying yying aed aing oed eing ied uing ying yes says sayings
        happiness happily easily busily business argument arguments ration rations
        allowances bowdlerization sensibility irritability conditioning possibly
        mesmerizing hybridize visualization accumulation activities activity optimization
        optimizations falsely fully oddly colly alli entli eli ousli bli izer anci enci
        abl bl at iz ational tional ement elements ment cement ational national nation
        feudal radical cyclical classical critical typical icily hilly silly sully
        tally rally ally jolly volley trolley valley galley gully bully belly jelly
        telly mall tall wall ball hall call fill kill mill pill till will bill doll poll
        toll troll scroll stroll knoll enroll install instill distill fulfill controllable
        ";

    #[test]
    fn porter_rules_match_fts5() {
        let fts5 = Fts5::open();
        let words: Vec<&str> = ENGLISH.split_whitespace().collect();
        let mut compared = fts5.check(ENGLISH);
        for word in &words {
            compared += fts5.check(word);
            compared += fts5.check(&word.to_uppercase());
            for suffix in [
                "s", "es", "ed", "ing", "ly", "ness", "al", "ation", "e", "y",
            ] {
                compared += fts5.check(&format!("{word}{suffix}"));
            }
        }
        assert!(compared > 3000);
    }

    #[test]
    fn separators_numbers_and_case_match_fts5() {
        let fts5 = Fts5::open();
        for text in [
            "",
            " ",
            "foo-bar",
            "v1.2.3",
            "e-mail",
            "it's",
            "It’s",
            "C++",
            "C#",
            "snake_case",
            "camelCaseWords",
            "SHOUTING LOUDLY",
            "MiXeD CaSe WoRdS",
            "123 4567 0x1F 3.14159 1,000,000 2024-01-02T03:04:05Z",
            "user@example.com https://example.com/path?q=1&r=2#frag",
            "tab\tseparated\nnew\r\nlines",
            "nul\0byte",
            "\0leading and trailing\0",
            "(parenthesised) [bracketed] {braced} <angled> \"quoted\"",
            "a b c ab bc abc abcd",
            "I O U A Y",
            "running-jumping.swimming,flying;dancing:singing!",
            "path/to/files, 10km, 5th, 3rd, 1st, 2nd",
            "the the the The THE",
        ] {
            fts5.check(text);
        }
    }

    #[test]
    fn accents_and_other_scripts_match_fts5() {
        let fts5 = Fts5::open();
        for text in [
            "café naïve Ångström Straße ÉCOLE façade jalapeño smörgåsbord Øresund",
            "crème brûlée résumé déjà vu coöperate Zürich Ærøskøbing Łódź Dvořák",
            "ǄǅǆǇǈǉ ﬁne ﬂow İstanbul ıi ẞ ß ſ Ŀ ŉ",
            "e\u{301}cole cafe\u{301} nai\u{308}ve a\u{30A}ngstro\u{308}m",
            "\u{301}leading combining \u{300}\u{301} marks\u{327}",
            "Ελληνικά ΣΊΣΥΦΟΣ σοφός άλφα ΐ ΰ",
            "Русский язык ЁЛКА ёлка Жжж",
            "中文 日本語のテキスト 한국어 丸い ｶﾀｶﾅ ＡＢＣ ａｂｃ",
            "emoji 😀 👍🏽 ❤\u{FE0F} family 👨\u{200D}👩\u{200D}👧",
            "zero\u{200B}width no\u{A0}break ideographic\u{3000}space",
            "private \u{E000}\u{F8FF} \u{F0000} \u{10FFFD} use",
            "nonchar \u{FFFE} \u{FFFF} a\u{FFFF}b \u{FFFD}",
            "unassigned \u{378} a\u{378}b tags \u{E0001}\u{E0041}",
            "numbers ٣٤ ½ ① Ⅻ ⅻ ⓐⒶ",
            "deseret 𐐀𐐨 ext-b 𠀀𠀁",
            "hebrew עברית arabic العربية thai ภาษาไทย devanagari हिन्दी",
        ] {
            fts5.check(text);
        }
    }

    #[test]
    fn token_lengths_around_the_limits_match_fts5() {
        let fts5 = Fts5::open();
        for length in 1..=70 {
            for unit in ["a", "s", "y", "é", "ж", "丸", "𠀀", "e\u{301}"] {
                fts5.check(&unit.repeat(length));
            }
            for suffix in ["ing", "ed", "ational", "sses", "ies", "s", "ement"] {
                let stem = "xb".repeat(length).chars().take(length).collect::<String>();
                fts5.check(&format!("{stem}{suffix}"));
                fts5.check(&format!("a{stem}{suffix}"));
            }
        }
        // FTS5 keeps at most 32768 bytes of a token.
        for length in [32767, 32768, 32769, 40000] {
            fts5.check(&"a".repeat(length));
            fts5.check(&format!("x {} y", "ab".repeat(length / 2)));
        }
        fts5.check(&"ж".repeat(20000));
        fts5.check(&format!("a{}", "ж".repeat(20000)));
        fts5.check(&format!("ab{}", "丸".repeat(20000)));
    }

    /// The stemmer drops one byte of a doubled "consonant", which may be the last byte of a
    /// character whose last two bytes are equal: FTS5's term is then not UTF-8.
    #[test]
    fn stemmer_splits_characters_as_fts5_does() {
        let fts5 = Fts5::open();
        for text in ["a丸ed", "a丸ing", "o𠀀ed", "oo丸ing", "丸丸eed"] {
            fts5.check(text);
        }
        let mut terms = Vec::new();
        tokenize("a丸ed", |term, _| terms.push(term.to_owned()));
        assert_eq!(terms, ["a\u{FFFD}"]);
    }

    #[test]
    fn fold_yields_scalar_values() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert!(char::from_u32(fold(u32::from(c))).is_some(), "{c:?}");
        }
    }

    /// Every Unicode scalar value alone, doubled, and after a letter.
    #[test]
    fn every_code_point_matches_fts5() {
        let fts5 = Fts5::open();
        let all: Vec<char> = (0..=0x10FFFF).filter_map(char::from_u32).collect();
        let mut compared = 0;
        for chunk in all.chunks(4096) {
            let text: String = chunk.iter().map(|c| format!(" {c}{c}q{c} ")).collect();
            compared += fts5.check(&text);
        }
        assert!(compared > 1_000_000);
    }

    /// xorshift64: reproducible pseudo-random numbers without a crate.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, bound: usize) -> usize {
            (self.next() % bound as u64) as usize
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    /// Pieces of random text: letters and suffixes the stemmer cares about, cased and
    /// accented letters, other scripts, marks, digits, symbols and separators.
    const PIECES: &[&str] = &[
        "a",
        "e",
        "i",
        "o",
        "u",
        "y",
        "b",
        "c",
        "d",
        "l",
        "m",
        "n",
        "r",
        "s",
        "t",
        "w",
        "x",
        "z",
        "ing",
        "ed",
        "eed",
        "ies",
        "sses",
        "ational",
        "tion",
        "ness",
        "ful",
        "ly",
        "bl",
        "at",
        "iz",
        "ement",
        "al",
        "ic",
        "ou",
        "ism",
        "ize",
        "ive",
        "iti",
        "ous",
        "ll",
        "A",
        "Y",
        "S",
        "ING",
        "É",
        "é",
        "è",
        "ê",
        "ë",
        "à",
        "å",
        "Å",
        "ç",
        "ñ",
        "ø",
        "ß",
        "ẞ",
        "æ",
        "Ǆ",
        "ǅ",
        "ǆ",
        "ﬁ",
        "İ",
        "ı",
        "Ω",
        "Σ",
        "σ",
        "ς",
        "ά",
        "Ж",
        "ж",
        "ё",
        "Ё",
        "丸",
        "中",
        "𠀀",
        "𐐀",
        "𐐨",
        "ｱ",
        "Ａ",
        "ａ",
        "Ⅻ",
        "ⅻ",
        "Ⓐ",
        "①",
        "٣",
        "½",
        "\u{300}",
        "\u{301}",
        "\u{308}",
        "\u{30A}",
        "\u{327}",
        "\u{331}",
        "\u{34F}",
        "\u{20D7}",
        "0",
        "1",
        "9",
        "42",
        "😀",
        "👍🏽",
        "\u{FE0F}",
        "\u{200B}",
        "\u{200D}",
        "\u{A0}",
        "\u{3000}",
        "\u{E000}",
        "\u{F0000}",
        "\u{10FFFD}",
        "\u{FFFE}",
        "\u{FFFF}",
        "\u{FFFD}",
        "\u{378}",
        "\u{E0041}",
        " ",
        " ",
        " ",
        "-",
        ".",
        "'",
        "_",
        "\t",
        "\n",
        "\0",
        "+",
        "/",
        "@",
        "’",
        "—",
    ];

    const LETTERS: &[&str] = &[
        "a", "e", "i", "o", "u", "y", "y", "b", "c", "d", "g", "h", "k", "l", "l", "m", "n", "p",
        "r", "s", "s", "t", "t", "v", "w", "x", "z",
    ];

    const SUFFIXES: &[&str] = &[
        "", "s", "es", "sses", "ies", "ss", "eed", "ed", "ing", "at", "bl", "iz", "y", "ational",
        "tional", "enci", "anci", "izer", "logi", "bli", "alli", "entli", "eli", "ousli",
        "ization", "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti",
        "biliti", "icate", "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence",
        "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "sion", "tion", "ou", "ism",
        "ate", "iti", "ous", "ive", "ize", "e", "ll", "le",
    ];

    #[test]
    fn random_text_matches_fts5() {
        let fts5 = Fts5::open();
        let mut random = Random(0x9E37_79B9_7F4A_7C15);
        for _ in 0..4000 {
            let mut text = String::new();
            for _ in 0..1 + random.below(24) {
                if random.below(16) == 0 {
                    let any = random.below(0x11_0000) as u32;
                    text.extend(char::from_u32(any));
                } else {
                    text.push_str(random.pick(PIECES));
                }
            }
            fts5.check(&text);
        }
    }

    #[test]
    fn random_words_stem_as_in_fts5() {
        let fts5 = Fts5::open();
        let mut random = Random(0xD1B5_4A32_D192_ED03);
        for _ in 0..2000 {
            let mut text = String::new();
            for _ in 0..1 + random.below(12) {
                for _ in 0..random.below(9) {
                    text.push_str(random.pick(LETTERS));
                }
                text.push_str(random.pick(SUFFIXES));
                text.push(' ');
            }
            fts5.check(&text);
        }
    }
}
