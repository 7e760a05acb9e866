package handler

import (
	"errors"
	"strings"
)

// Environment names exec.env_allow refuses however the config lists them:
// they make the dynamic linker, a shell or an interpreter load or run
// code named by the value (LD_PRELOAD, BASH_ENV=/dev/stdin with stdin,
// BASH_FUNC_x%%, PERL5OPT=-M..., PYTHONSTARTUP, ...), or change which
// program a name runs (PATH) or how a shell splits words (IFS). Compared
// upper-cased. The list cannot be complete: exec.env_allow is the device's
// statement that the names it lists are safe for its allowed commands.
var (
	envRefusedNames = []string{
		"PATH", "IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "CDPATH", "GLOBIGNORE",
		"HOSTALIASES", "LOCPATH", "NLSPATH", "GCONV_PATH", "GLIBC_TUNABLES", "RESOLV_HOST_CONF",
		"OPENSSL_CONF", "OPENSSL_ENGINES", "NODE_OPTIONS", "NODE_PATH", "JDK_JAVA_OPTIONS",
		"PAGER", "EDITOR", "VISUAL", "BROWSER", "LESSOPEN", "LESSCLOSE", "MANPAGER", "SSH_ASKPASS", "SUDO_ASKPASS",
		"PHPRC", "PHP_INI_SCAN_DIR", "TCLLIBPATH",
	}
	envRefusedPrefixes = []string{
		"AX_", "LD_", "DYLD_", "BASH_FUNC_", "BASH_", "PERL", "PYTHON", "RUBY", "GEM_", "LUA_", "JAVA_", "_JAVA_",
		"GIT_", "MALLOC_",
	}
)

// CheckEnvAllowName reports why name cannot be listed in exec.env_allow,
// or nil: it must be a plain variable name ([A-Za-z_][A-Za-z0-9_]*, so no
// BASH_FUNC_x%%) and not one that loads or runs code (envRefusedNames,
// envRefusedPrefixes: LD_*, BASH_ENV, ENV, BASH_FUNC_*, PATH, PERL*,
// PYTHON*, IFS, ...) or is the agent's own (AX_*).
func CheckEnvAllowName(name string) error {
	if name == "" {
		return errors.New("is empty")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return errors.New("must be a plain variable name: letters, digits and _, not starting with a digit")
		}
	}
	up := strings.ToUpper(name)
	for _, n := range envRefusedNames {
		if up == n {
			return errors.New("can make the command run other code and is never allowed")
		}
	}
	for _, p := range envRefusedPrefixes {
		if strings.HasPrefix(up, p) {
			if p == "AX_" {
				return errors.New("AX_* names are set by the agent")
			}
			return errors.New("names starting with " + p + " can make the command run other code and are never allowed")
		}
	}
	return nil
}
