package main

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/axsched/ax/agent"
)

// flagKeys maps flags to config keys.
var flagKeys = map[string]string{
	"id": "id", "nats-url": "nats.url", "data-dir": "data_dir", "workers": "workers",
	"log-format": "log.format", "log-level": "log.level",
}

// secretKeys are masked by --print-config.
var secretKeys = []string{"nats.token", "nats.creds"}

func loadViper(file string, flags *pflag.FlagSet) (*viper.Viper, error) {
	v := viper.New()
	setDefaults(v, "", reflect.ValueOf(agent.DefaultConfig()))
	v.SetEnvPrefix("AX")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for flag, key := range flagKeys {
		if f := flags.Lookup(flag); f != nil && f.Changed {
			if err := v.BindPFlag(key, f); err != nil {
				return nil, err
			}
		}
	}
	if file != "" {
		v.SetConfigFile(file)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read config %s: %w", file, err)
		}
	}
	return v, nil
}

// setDefaults registers every key of the config (so AX_* env variables of
// nested keys are seen) with its default value.
func setDefaults(v *viper.Viper, prefix string, rv reflect.Value) {
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" {
			continue
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		fv := rv.Field(i)
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			setDefaults(v, key, fv)
			continue
		}
		v.SetDefault(key, fv.Interface())
	}
}

func decodeConfig(v *viper.Viper) (agent.Config, error) {
	var cfg agent.Config
	// Viper's default hooks read durations ("30s") and comma lists.
	if err := v.UnmarshalExact(&cfg); err != nil {
		return cfg, fmt.Errorf("%w: %v", agent.ErrConfig, err)
	}
	return cfg, nil
}

func maskedSettings(v *viper.Viper) map[string]any {
	all := v.AllSettings()
	for _, k := range secretKeys {
		parts := strings.Split(k, ".")
		m := all
		for _, p := range parts[:len(parts)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				m = nil
				break
			}
			m = next
		}
		if m != nil {
			if s, ok := m[parts[len(parts)-1]].(string); ok && s != "" {
				m[parts[len(parts)-1]] = "*****"
			}
		}
	}
	return all
}
