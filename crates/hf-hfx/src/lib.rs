//! The HFX screen compiler: HFX source to an ES module, via oxc.
